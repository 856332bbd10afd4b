"""Programs and the tools that build and run them: toolchain, compiler, drop reasons, bmv2 builds."""
