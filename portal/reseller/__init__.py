"""A reseller's pages: its customers and the prices it charges them (views on top of accounts,
catalog and sizing; no models)."""
