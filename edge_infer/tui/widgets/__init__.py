"""Widgets by region of the screen: one module per pane."""
