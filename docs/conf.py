"""Sphinx configuration of the docs site (``make docs``: built offline, strictly, into build/docs/).

The pages are Markdown (MyST), readable as they are on a code host and built into the site. The build is
strict (``-W --keep-going -n`` in the Makefile): a link to a page, a heading or a repository file that does
not exist, a page that no table of contents lists, or a table of contents naming a missing page fails it.
Nothing is fetched: no intersphinx, no theme assets from elsewhere.
"""

from __future__ import annotations

project = "Shardscope"
author = "Shardscope contributors"
copyright = "Shardscope contributors"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# Links to a heading (`page.md#the-heading`) resolve by the heading's slug, as code hosts make them, and a
# link whose target is missing is a warning (hence an error).
myst_heading_anchors = 4
myst_enable_extensions = ["deflist"]
nitpicky = True
# cost-model.md shows estimates as JSON with "..." where fields are left out: not a link or page problem.
suppress_warnings = ["misc.highlighting_failure"]

html_theme = "alabaster"
html_title = "Shardscope"
html_show_sourcelink = False
html_show_sphinx = False
html_copy_source = False
html_theme_options = {
    "description": "See and debug how JAX arrays are sharded across devices.",
    "show_powered_by": False,
    "page_width": "1180px",
    "sidebar_width": "240px",
    "fixed_sidebar": True,
}
html_sidebars = {"**": ["about.html", "navigation.html", "searchbox.html"]}
