"""Unit tests of controller.programs."""
