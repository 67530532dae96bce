"""The Helm post-renderer: a kio-style pipeline over a multi-document YAML stream.

    post_render(data: bytes) -> PostRenderResult(output: bytes, warnings: list[str])

raises PostRenderError (one message naming the document) on bad input.
"""

from cozyrender.postrender.errors import PostRenderError
from cozyrender.postrender.pipeline import PostRenderResult, post_render

__all__ = ["PostRenderError", "PostRenderResult", "post_render"]
