"""Recipes that produced every file under models/ (run them with `specvideo train ...`)."""
