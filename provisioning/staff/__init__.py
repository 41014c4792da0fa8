"""The staff console: the approval queue, runs, the node inventory, login lock-outs and the staff
home's figures (views, forms and URLs under /ops/)."""
