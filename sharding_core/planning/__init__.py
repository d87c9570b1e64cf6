"""Planning the user's own program on hardware they don't have: compile-only meshes and plans."""
