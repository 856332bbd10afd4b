"""Unit tests of controller.service."""
