package cli

import (
	"cmp"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PlanJudged is Plan counting only what would happen: the changes are
// those of the objects the API server admits (verdicts, one per object);
// what only refused objects would change is listed too, marked Refused,
// and not counted. The templates and notes are those of every object.
func PlanJudged(st *PlanState, objs []client.Object, verdicts []PlannedObject) PlanReport {
	report, _ := planJudged(st, objs, verdicts)
	return report
}

// planJudged is PlanJudged, with the bindings a ServiceAccount ceiling
// writes for the admitted objects.
func planJudged(st *PlanState, objs []client.Object, verdicts []PlannedObject) (PlanReport, []ceilingCheck) {
	full, checks := plan(st, objs, verdicts)
	var admitted []client.Object
	for i, o := range objs {
		if i < len(verdicts) && verdicts[i].Admitted {
			admitted = append(admitted, o)
		}
	}
	if len(admitted) == len(objs) {
		return full, checks
	}
	only, checks := plan(st, admitted, verdicts)
	happens := map[string]int{}
	for _, c := range only.Changes {
		happens[changeKey(c)]++
	}
	out := full
	out.Changes, out.Unchanged = only.Changes, only.Unchanged
	for _, c := range full.Changes {
		if k := changeKey(c); happens[k] > 0 {
			happens[k]--
			continue
		}
		c.Refused = true
		out.Changes = append(out.Changes, c)
	}
	slices.SortStableFunc(out.Changes, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)), cmp.Compare(a.Name, b.Name))
	})
	return out, checks
}

func changeKey(c Change) string { return fmt.Sprintf("%#v", c) }

// actionOf is a change's action as the table shows it.
func actionOf(c Change) string {
	if c.Refused {
		return "REFUSED " + c.Action
	}
	return c.Action
}

// counted counts the changes of action that happen (not refused).
func counted(changes []Change, action string) int {
	n := 0
	for _, c := range changes {
		if c.Action == action && !c.Refused {
			n++
		}
	}
	return n
}

// refusedChanges counts the changes that do not happen.
func refusedChanges(changes []Change) int {
	n := 0
	for _, c := range changes {
		if c.Refused {
			n++
		}
	}
	return n
}
