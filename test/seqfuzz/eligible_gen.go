package seqfuzz

import "math/rand/v2"

// Eligible access steps come from a stream of their own, as leader
// changes do: one seed in eligibleOdds gets an eligible motif (an eligible
// policy, one or two requests, decisions, then time, an end or a change of
// the policy), woven into the steps the main stream drew, which are left
// as they were. A seed without a motif generates exactly what it generated
// before the eligible steps existed.
//
// eligibleKey was chosen (the first of "eligible"+0..4095 that does) so
// that no seed of the fixed list of its day gets a motif: each keeps the
// sequence it was chosen for (TestGenerateFixedSequences, TestFinderShapes).
// The fixed seeds with eligible steps are in findings.go.
const (
	eligibleOdds = 3
	eligibleKey  = 0x656c696769626c65 + 311 // "eligible"+311
	// eligibleMax is the most steps a motif adds.
	eligibleMax = 12
)

func eligibleStream(seed uint64) *rand.Rand { return keyedStream(seed, eligibleKey) }

func keyedStream(seed, key uint64) *rand.Rand { return rand.New(rand.NewPCG(seed^key, seed+key)) }

// withEligible weaves seed's eligible motif, if it has one, into seq: it
// starts at a random point, and now and then a step of seq runs between
// two of its steps.
func withEligible(seed uint64, seq Sequence) Sequence {
	r := eligibleStream(seed)
	motif := eligibleMotif(r)
	if motif == nil {
		return seq
	}
	at := r.IntN(len(seq) + 1)
	out := append(make(Sequence, 0, len(seq)+len(motif)), seq[:at]...)
	rest := seq[at:]
	for _, s := range motif {
		out = append(out, s)
		if len(rest) > 0 && r.IntN(3) == 0 {
			out, rest = append(out, rest[0]), rest[1:]
		}
	}
	return append(out, rest...)
}

// eligibleMotif returns the eligible steps of a seed, nil for most seeds.
func eligibleMotif(r *rand.Rand) Sequence {
	if r.IntN(eligibleOdds) != 0 {
		return nil
	}
	rnd := func(op Op) Step {
		return Step{Op: op, A: r.IntN(16), B: r.IntN(16), C: r.IntN(16), D: r.IntN(16), E: latest, F: r.IntN(16)}
	}
	seq := Sequence{rnd(OpAdminEligible)}
	for range 1 + r.IntN(2) {
		req := rnd(OpRequest)
		if r.IntN(3) > 0 {
			req.B = r.IntN(3) // valid, mostly
		}
		seq = append(seq, req)
		if r.IntN(3) == 0 { // an approval the guard refuses: by the requester, or by C
			seq = append(seq, Step{Op: OpApprove, A: 2 + r.IntN(2), E: latest})
		}
		switch r.IntN(6) {
		case 0, 1, 2:
			seq = append(seq, Step{Op: OpApprove, A: pick([]int{0, 0, 4}, r.IntN(3)), E: latest})
		case 3:
			seq = append(seq, Step{Op: OpDeny, E: latest})
		case 4:
			seq = append(seq, Step{Op: OpEnd, A: r.IntN(3), E: latest})
		}
	}
	switch r.IntN(5) {
	case 0, 1: // time passes the end
		seq = append(seq, Step{Op: OpSleep})
	case 2: // the policy deleted or narrowed while active
		seq = append(seq, Step{Op: OpAdminEligibleChange, A: latest, B: r.IntN(2)})
	case 3: // ended early
		seq = append(seq, Step{Op: OpEnd, A: r.IntN(3), E: latest})
	case 4:
		seq = append(seq, Step{Op: OpAdminEligibleChange, A: latest, B: r.IntN(2)}, Step{Op: OpSleep})
	}
	return seq
}
