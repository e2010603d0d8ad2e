package seqfuzz

// Finder is a seed whose sequence found a case of an issue on the commit
// it was found on.
type Finder struct {
	Seed uint64
	// Case names the case; Found is the violation the seed produced before
	// the case was fixed (after the fix, the sequence must pass).
	Case, Found string
}

// finderSeeds found the cases of issue 38 on 41e95b3 (before its fix).
// They are expected to FAIL until the guard refuses those paths, and to
// pass from then on: they stay in the fixed list as regressions.
var finderSeeds = []Finder{}

// regressionSeeds are seeds that passed when they were added: a spread of
// the steps the generator makes.
var regressionSeeds = []uint64{}
