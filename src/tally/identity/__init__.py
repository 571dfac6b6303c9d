"""The lab's identity service: a Keystone v3 subset (version discovery, password
authentication with a project scope, token validation) over users from settings.

`tokens.Tokens` issues and checks the tokens; `filter.TokenFilter` is the WSGI filter
that lets Placement and the lab compute accept them (as auth_token does for Keystone);
`app.create_app` is the HTTP face under /identity.
"""
