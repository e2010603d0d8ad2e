package seqfuzz

import (
	"os"
	"strconv"
	"strings"
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
		if len(a) < minSteps || len(a) > maxSteps+motifMax+eligibleMax {
			t.Fatalf("seed %d: %d steps", seed, len(a))
		}
	}
	if s := os.Getenv("ORIA_SEQFUZZ_PRINT"); s != "" {
		seed, _ := strconv.ParseUint(s, 10, 64)
		t.Logf("seed %d:\n%s", seed, Generate(seed))
	}
}

// TestGenerateFixedSequences: every fixed seed generates the sequence
// recorded in testdata/fixed-sequences.txt (the sequences the fixed seeds
// were chosen for; a change of the generator must not move them, see
// leaderStream). A new fixed seed's sequence is added there with it
// (ORIA_SEQFUZZ_PRINT=<seed> go test -short -run TestGenerate -v prints it).
func TestGenerateFixedSequences(t *testing.T) {
	b, err := os.ReadFile("testdata/fixed-sequences.txt")
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[uint64]string{}
	for _, block := range strings.Split("\n"+string(b), "\nseed ")[1:] {
		head, steps, _ := strings.Cut(block, "\n")
		seed, err := strconv.ParseUint(head, 10, 64)
		if err != nil {
			t.Fatalf("testdata/fixed-sequences.txt: %q: %v", head, err)
		}
		recorded[seed] = strings.TrimSuffix(steps, "\n") + "\n"
	}
	for _, seed := range fixedSeeds() {
		want, ok := recorded[seed]
		if !ok {
			t.Errorf("fixed seed %d has no recorded sequence in testdata/fixed-sequences.txt; add:\nseed %d\n%s", seed, seed, Generate(seed))
			continue
		}
		if got := Generate(seed).String(); got != want {
			t.Errorf("fixed seed %d generates another sequence than the one recorded (the generator changed):\n%s\nrecorded:\n%s", seed, got, want)
		}
	}
}
