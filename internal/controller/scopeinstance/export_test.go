package scopeinstance

// SealGates is the standby's write of gates, for the integration tests.
var SealGates = sealGates
