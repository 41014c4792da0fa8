"""The staff console: the staff home, the approval queue, runs, the node inventory, billing's staff
pages (invoices, credit notes) and login lock-outs (views, forms, URLs and templates under /ops/)."""
