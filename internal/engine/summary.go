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
