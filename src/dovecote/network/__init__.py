"""Networks of brokers (SPEC N1): network connectors and the bridges they keep."""
