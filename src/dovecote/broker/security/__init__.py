"""Security as broker plugins: who a connection is (authentication against the configured
users) and what it may do (authorization by destination pattern), as ActiveMQ's
simpleAuthenticationPlugin and authorizationPlugin."""
