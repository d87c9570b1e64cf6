"""Tests of the domain against JAX, of the API through the in-process client, and (marked slow) against
a live server, worker processes and headless Chromium."""
