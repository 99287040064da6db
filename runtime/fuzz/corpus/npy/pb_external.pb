Btj
locationweights.binp