package seqfuzz

import (
	"fmt"
	"strings"
)

// Op is what a step does, and who does it.
type Op int

// The steps. Their parameters (Step.A..E) are small choices, resolved when
// the step runs against what the run has made so far (an index modulo the
// number of grants, objects, ...), so that a step still means something
// when the shrinker removed the steps before it.
const (
	// The admins: grants to the victim V, revocations, namespaces.
	OpAdminGrant          Op = iota // A via, B roles, C target, D window
	OpAdminRevoke                   // A grant
	OpAdminDeleteTemplate           // A grant
	OpAdminWindow                   // A grant, B edge
	OpAdminRecreateNS               // A namespace
	OpAdminRestoreBase              // A namespace: the persona's admin RoleBinding again
	OpAdminToggleLabel              // A namespace: the victims' selector label
	// D: create/update/patch/delete on oria's kinds, admin of namespace d.
	OpDGrant       // A roles, B subject, C target, D window, E grant (gate/inline role), F template name
	OpDInstanceOf  // A grant (its template), C target
	OpDWindow      // A object, B edge
	OpDNamespaces  // A object, B list
	OpDDelete      // A object
	OpDMeta        // A object, B which
	OpDPolicy      // A access, B subject, C target, D window
	OpNBind        // N (admin of namespace n): a RoleBinding there. A role, B subject, E grant
	OpCAnnotate    // C (ClusterRole writes, no bind/escalate): A grant's gate, B value
	OpCSquat       // C: a ClusterRole under A grant's gate name
	OpCLabel       // C: A grant's gate or inline role, B label
	OpSPinUIDs     // S (oria's status): A instance's status.namespaceUIDs := current UIDs
	OpSObservedGen // S: A instance's status.observedGeneration := generation-1
	OpOriaStop
	OpOriaStart
	OpSleep // until just past the next window edge (at most 15 s)
	// OpLeaderChange: the leading oria replica is killed (SIGKILL) just
	// before the next window instant, the standby takes over, the killed
	// one comes back as the new standby. Last, with no weight: the
	// generator makes it from a stop (gen.go), so that adding it left
	// every other draw of every seed as it was.
	OpLeaderChange
	// Eligible access (eligible.go): last, with no weight, drawn from a
	// stream of their own (eligibleStream), so that adding them left
	// every other draw of every seed as it was.
	OpAdminEligible       // admin: an eligible RBACPolicy. A subjects, B approvers, C namespaces, D maxDuration
	OpAdminEligibleChange // admin: A eligible policy: B delete or narrow
	OpRequest             // A requester (V, D), B variant, C namespaces, D duration, E policy
	OpApprove             // A who, E request
	OpDeny                // A who, E request
	OpEnd                 // A who, E request
	numOps
)

// Step is one step of a sequence.
type Step struct {
	Op               Op
	A, B, C, D, E, F int
}

// Choices, by parameter. The generator draws indices into these; the
// runner and the descriptions read them.
var (
	adminRoleChoices = []string{"edit", "view", "inline get secrets", "inline create deployments", "extension edit"}
	policyAccess     = []string{"edit", "admin", "view"}
	adminTargets     = []string{"[v1]", "[v1 v2]", "selector", "cluster-wide"}
	windowChoices    = []string{"none", "future (pending)", "open now, ending soon"}
	dRoleChoices     = []string{"admin", "edit", "inline get secrets", "the gate of grant", "extension edit", "the inline role of grant", "view"}
	subjectChoices   = []string{"D", "V", "N"}
	nSubjects        = []string{"N", "V"}
	dTargets         = []string{"[d]", "[v1]", "selector", "cluster-wide", "[n]", "[d v1]"}
	edgeChoices      = []string{"expiresAt +1y", "expiresAt zero time", "expiresAt year 0", "sub-second window", "expiresAt +5s",
		"no window", "notBefore zero time", "expiresAt 1s ago"}
	nsListChoices = [][]string{{"d"}, {"v1"}, {"d", "v1"}, {"n"}}
	metaChoices   = []string{"label rbac-policy=<an admin policy>", "label managed-by=oria", "annotation gate-roles=admin", "labels removed"}
	nRoleChoices  = []string{"the gate of grant", "admin", "extension edit", "edit", "the inline role of grant"}
	gateAnnots    = []string{"admin,view", "edit", ""}
	cLabelChoices = []string{"gate: aggregate-to-edit", "gate: oria labels removed", "inline role: aggregate-to-edit"}
	namespaceKeys = []string{"d", "n", "v1", "v2"}
)

// pick resolves a choice: i modulo len(s); latest (-1) is the last.
func pick[T any](s []T, i int) T { return s[((i%len(s))+len(s))%len(s)] }

// ref names a grant or object index in a description.
func ref(i int) string {
	if i == latest {
		return "-latest"
	}
	return fmt.Sprint(i)
}

func (s Step) String() string {
	switch s.Op {
	case OpAdminGrant:
		via := "ScopeInstance"
		what := pick(adminRoleChoices, s.B)
		if s.A%2 == 1 {
			via, what = "RBACPolicy", "extension "+pick(policyAccess, s.B)
		}
		return fmt.Sprintf("admin: grant V %s via %s, %s, window %s", what, via, pick(adminTargets, s.C), pick(windowChoices, s.D))
	case OpAdminRevoke:
		return fmt.Sprintf("admin: delete grant#%s", ref(s.A))
	case OpAdminDeleteTemplate:
		return fmt.Sprintf("admin: delete the template of grant#%s", ref(s.A))
	case OpAdminWindow:
		return fmt.Sprintf("admin: window of grant#%s: %s", ref(s.A), pick(edgeChoices, s.B))
	case OpAdminRecreateNS:
		return fmt.Sprintf("admin: delete namespace %s and create it again", pick(namespaceKeys, s.A))
	case OpAdminRestoreBase:
		return fmt.Sprintf("admin: restore the persona's admin RoleBinding in %s", pick([]string{"d", "n"}, s.A))
	case OpAdminToggleLabel:
		return fmt.Sprintf("admin: toggle the selector label of namespace %s", pick(namespaceKeys, s.A))
	case OpDGrant:
		return fmt.Sprintf("D: template [%s] for %s (template name: %s), instance %s, window %s", dRole(s), pick(subjectChoices, s.B),
			pick([]string{"new", "new", fmt.Sprintf("grant#%s's template's", ref(s.E))}, s.F), pick(dTargets, s.C), pick(windowChoices, s.D))
	case OpDInstanceOf:
		return fmt.Sprintf("D: instance of grant#%s's template in %s", ref(s.A), pick(dTargets, s.C))
	case OpDWindow:
		return fmt.Sprintf("D: window-only patch of object#%s: %s", ref(s.A), pick(edgeChoices, s.B))
	case OpDNamespaces:
		return fmt.Sprintf("D: namespaces of object#%s := %v", ref(s.A), pick(nsListChoices, s.B))
	case OpDDelete:
		return fmt.Sprintf("D: delete object#%s", ref(s.A))
	case OpDMeta:
		return fmt.Sprintf("D: metadata of object#%s: %s", ref(s.A), pick(metaChoices, s.B))
	case OpDPolicy:
		return fmt.Sprintf("D: RBACPolicy extension %s for %s in %s, window %s", pick(policyAccess[:2], s.A), pick(subjectChoices, s.B),
			pick(dTargets, s.C), pick(windowChoices, s.D))
	case OpNBind:
		role := pick(nRoleChoices, s.A)
		if strings.HasSuffix(role, "grant") {
			role += "#" + ref(s.E)
		}
		return fmt.Sprintf("N: RoleBinding in n of %s to %s", role, pick(nSubjects, s.B))
	case OpCAnnotate:
		return fmt.Sprintf("C: annotate the gate of grant#%s gate-roles=%q", ref(s.A), pick(gateAnnots, s.B))
	case OpCSquat:
		return fmt.Sprintf("C: create a ClusterRole named as the gate of grant#%s", ref(s.A))
	case OpCLabel:
		return fmt.Sprintf("C: grant#%s's %s", ref(s.A), pick(cLabelChoices, s.B))
	case OpSPinUIDs:
		return fmt.Sprintf("S: status.namespaceUIDs of instance#%s := the namespaces' current UIDs", ref(s.A))
	case OpSObservedGen:
		return fmt.Sprintf("S: status.observedGeneration of instance#%s := generation-1", ref(s.A))
	case OpOriaStop:
		return "oria: stop"
	case OpOriaStart:
		return "oria: start"
	case OpSleep:
		return "time: sleep past the next window edge"
	case OpLeaderChange:
		return "oria: leader change (the leader killed before the next window instant, the standby takes over)"
	case OpAdminEligible, OpAdminEligibleChange, OpRequest, OpApprove, OpDeny, OpEnd:
		return eligibleString(s)
	}
	return fmt.Sprintf("op %d", s.Op)
}

func dRole(s Step) string {
	r := pick(dRoleChoices, s.A)
	if strings.HasSuffix(r, "grant") {
		r += "#" + ref(s.E)
	}
	return r
}

// Sequence is the steps of one seed.
type Sequence []Step

func (q Sequence) String() string {
	var b strings.Builder
	for i, s := range q {
		fmt.Fprintf(&b, "  %2d. %s\n", i+1, s)
	}
	return b.String()
}
