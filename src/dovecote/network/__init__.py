"""Networks of brokers (compatibility N1): network connectors and the bridges they keep."""
