package engine

import "time"

// Summary aggregates the outcomes of a reconcile's writes.
type Summary struct {
	// Count is the number of objects per action.
	Count map[Action]int
	// Conflicts describe the objects left alone because oria did not create
	// them, in outcome order.
	Conflicts []error
	// Errors are the failed writes, in outcome order.
	Errors []error
	// Forbidden are the writes the ceiling's ServiceAccount may not make, in
	// outcome order.
	Forbidden []error
	// Bad are the namespaces ("" for cluster-scoped objects) with a conflict
	// or a failure: not fully bound.
	Bad map[string]bool
	// Skipped are the namespaces where a create was skipped because the
	// namespace is going away.
	Skipped map[string]bool
	// Changed lists the names of the objects written, by action (Created,
	// Updated, Replaced, Deleted), in outcome order.
	Changed map[Action][]Outcome
	// Expected counts the objects assumed to exist because the engine
	// created them a moment ago; the caller looks again after
	// ExpectationTTL.
	Expected int
}

// Recheck returns when the caller should look again because of what the
// writes could not confirm: ExpectationTTL when an object was assumed to
// exist, else 0.
func (s Summary) Recheck() time.Duration {
	if s.Expected > 0 {
		return ExpectationTTL
	}
	return 0
}

// Summarize aggregates outcomes.
func Summarize(outcomes ...[]Outcome) Summary {
	s := Summary{Count: map[Action]int{}, Bad: map[string]bool{}, Skipped: map[string]bool{}, Changed: map[Action][]Outcome{}}
	for _, list := range outcomes {
		for _, o := range list {
			s.Count[o.Action]++
			if o.Expected {
				s.Expected++
			}
			switch o.Action {
			case Conflict:
				s.Conflicts = append(s.Conflicts, o.Err)
				s.Bad[o.Namespace] = true
			case Failed:
				s.Errors = append(s.Errors, o.Err)
				s.Bad[o.Namespace] = true
			case Forbidden:
				s.Forbidden = append(s.Forbidden, o.Err)
				s.Bad[o.Namespace] = true
			case Skipped:
				s.Skipped[o.Namespace] = true
			case Created, Updated, Replaced, Deleted:
				s.Changed[o.Action] = append(s.Changed[o.Action], o)
			}
		}
	}
	return s
}

// Wrote reports whether any object was written.
func (s Summary) Wrote() bool {
	return s.Count[Created]+s.Count[Updated]+s.Count[Replaced]+s.Count[Deleted] > 0
}

// KindOutcome is the outcomes of the bindings of one kind of a
// binding.Set, in the set's order.
type KindOutcome struct {
	// Kind is the bindings' kind (Kind.Name).
	Kind string
	// Namespaced: the kind's bindings are in namespaces.
	Namespaced bool
	Outcomes   []Outcome
}

// SetOutcome is one outcome per binding of a binding.Set, keyed like the
// set: kind by kind, in its order (EnsureSet, DeleteSet).
type SetOutcome []KindOutcome

// All returns every outcome of s, kind after kind: in the order of the
// set's Objects.
func (s SetOutcome) All() []Outcome {
	var out []Outcome
	for _, k := range s {
		switch {
		case len(k.Outcomes) == 0:
		case out == nil:
			// One kind alone (the usual grant): its outcomes as they
			// are, not copied.
			out = k.Outcomes[:len(k.Outcomes):len(k.Outcomes)]
		default:
			out = append(out, k.Outcomes...)
		}
	}
	return out
}

// Len counts the outcomes of s.
func (s SetOutcome) Len() int {
	n := 0
	for _, k := range s {
		n += len(k.Outcomes)
	}
	return n
}

// Plus returns the outcomes of s followed by those of o, kind by kind
// (either may be empty).
func (s SetOutcome) Plus(o SetOutcome) SetOutcome {
	if len(s) == 0 {
		return o
	}
	out := make(SetOutcome, len(s))
	for i, k := range s {
		out[i] = k
		if i < len(o) {
			out[i].Outcomes = append(k.Outcomes[:len(k.Outcomes):len(k.Outcomes)], o[i].Outcomes...)
		}
	}
	return out
}
