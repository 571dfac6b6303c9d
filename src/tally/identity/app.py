"""The identity app (a Keystone v3 subset), mounted under /identity by tally.serve.compose."""

from __future__ import annotations

import logging

import falcon

from tally.identity import handlers
from tally.identity.tokens import Tokens

log = logging.getLogger("tally.identity")

# (path, resource factory)
ROUTES = (
    ("/", handlers.Versions),
    ("/v3", handlers.Version),
    ("/v3/auth/tokens", handlers.AuthTokens),
)


def create_app(tokens: Tokens, catalog: handlers.Catalog) -> falcon.App:
    """`catalog` lists the services a token's catalog names: (type, name, path or URL);
    a path is joined to the address the client used."""
    app = falcon.App(cors_enable=False)
    app.req_options.strip_url_path_trailing_slash = True
    for path, resource in ROUTES:
        app.add_route(path, resource(tokens, catalog))
    app.add_error_handler(handlers.IdentityError, handlers.render_error)
    app.add_error_handler(falcon.HTTPError, handlers.render_falcon_error)
    return app
