"""Running one component: the VIASH block, staged inputs, limits, and the record of what it did."""
