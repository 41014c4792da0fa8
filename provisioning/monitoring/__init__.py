"""GPU monitoring: scrape targets for Prometheus, chart series read from it (or simulated), the
alerts its rules send back, and the portal's own metrics. ``docs/operations.md`` "Monitoring"."""
