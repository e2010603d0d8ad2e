package seqfuzz

// Finder is a seed whose sequence found a case on the commit it was found
// on.
type Finder struct {
	Seed uint64
	// Case names the case; Found is the violation the seed produced before
	// the case was fixed. After the fix the sequence must pass.
	Case, Found string
	// Shape is the order of steps the case needs (scan_test.go's shapes).
	Shape string
}

// finderSeeds found the cases of issue 38 on 41e95b3, before their fix.
// They failed until the guard (or the controller) refused those paths
// (each passes on 2026-11-28's main, with the fixes), and must pass from
// then on: they stay in the fixed list as regressions. A
// change of the generator changes every seed's sequence: check that each
// still has its shape (TestScanSeeds, TestFinderShapes) and still finds
// its case on a commit without the fix, or find new seeds.
var finderSeeds = []Finder{
	{Seed: 3, Shape: "case1", Case: "issue 38 case 1: D names an admin's gate (oria-window-<instance>-<hash of UID>) in a template while it is " +
		"empty (the grant is pending) and binds it cluster-wide to herself; both are admitted",
		Found: "after step 3 (notBefore passed, oria filled the gate): ESCALATION: D may get secrets in v1, in v2 and cluster-wide"},
	{Seed: 28, Shape: "case3", Case: "issue 38 case 3: D binds admin to herself in d (admitted); the admin deletes d and creates it again; " +
		"D's window-only patch (spec.expiresAt +1y) is admitted as a narrowing and oria pins the new d",
		Found: "after step 6: ESCALATION: D may create deployments in d, D may get secrets in d"},
	{Seed: 48, Shape: "case4", Case: "issue 38 case 4: D binds edit to herself in d; the admin re-creates d (NamespaceRecreated); S patches " +
		"status.namespaceUIDs with the new d's UID; oria starts again and binds in the new d",
		Found: "after step 6 (oria started): ESCALATION: D may create deployments in d, D may get secrets in d"},
	{Seed: 9, Shape: "case4gen", Case: "issue 38 case 4, through another status field: S sets status.observedGeneration to generation-1 on D's " +
		"instance in a re-created d; at oria's next reconcile (a restart) the spec looks unobserved and oria pins the new d",
		Found: "after step 6 (oria started): ESCALATION: D may create deployments in d, D may get secrets in d"},
	// Found on 41e95b3 beyond issue 38's cases 1, 3 and 4, fixed since
	// (the gate's seal, binding.NarrowGate, the time edges of issue 40).

	{Seed: 96, Case: "issue 38 case 4, oria running: as seed 48, the reconcile that binds made by an event on the namespace " +
		"(the admin labels d) instead of a restart",
		Found: "after step 8: ESCALATION: D may create deployments in d, D may get secrets in d"},
	{Seed: 2387, Shape: "nbind", Case: "issue 38 case 1 without oria's kinds: N, admin of n only, binds an admin's pending gate " +
		"(ScopeInstance, extension edit, over a selector) with a plain RoleBinding in n; Kubernetes admits it (an empty role " +
		"grants nothing to escalate) and the guard never sees it; at notBefore oria fills the gate",
		Found: "after step 4 (notBefore passed): ESCALATION: N may create gadgets in n"},
	{Seed: 226, Shape: "nbind", Case: "as seed 2387, the gate of an admin's pending gated RBACPolicy (extension admin)",
		Found: "after step 4: ESCALATION: N may create gadgets in n"},
	{Seed: 1795871357401153948, Case: "a pending gated grant whose template the admin deleted is filled at notBefore anyway " +
		"(the gate's sources outlive the template: issue 38 case 2 without C's annotation write); shrunk to: admin grants V edit " +
		"over a selector, pending; admin deletes the template; notBefore passes",
		Found: "ESCALATION: V may create deployments and get secrets in v1 and v2"},
	{Seed: 1795871357401153935, Case: "a sub-second window (notBefore now+3.2 s, expiresAt 0.5 s later, written by the admin) on a " +
		"pending gated RBACPolicy: V gets the grant and keeps it past expiresAt (the time edges of the issue beside 38)",
		Found: "after step 3 (about 8 s after expiresAt): ESCALATION: V may create gadgets in v1 and v2"},
	{Seed: 1795879018575510949, Case: "a grant whose template the admin deleted kept its bindings (a spec error kept what it could " +
		"not judge, to spare an outage); found by `make fuzz-sequences FUZZTIME=10m` on 514ea8e and fixed since (a missing " +
		"template allows nothing); shrunk to: admin grants V edit in [v1 v2]; admin deletes the template; admin grants V a " +
		"pending policy (the run then outlives the grace)",
		Found: "after step 4: ESCALATION: V may create deployments and get secrets in v1 and v2"},
}

// regressionSeeds passed when they were added (on 41e95b3): a spread of
// the steps the generator makes, each 10 to 25 s.
var regressionSeeds = []uint64{
	1795871357401153963, // oria stopped and started (twice), an admin write refused while the guard is down, N binds edit to V, S writes the UIDs of a selector instance
	1795871357401153939, // D narrows an admin's instance to d, names its gate in a gated template, C annotates a gate that does not exist
	1795871357401153943, // an admin's gated policy and cluster-wide instance, oria down across notBefore, window edits refused while down and as invalid
	1795871357401153946, // C squats the gate name of an admin's cluster-wide policy, the admin deletes it, D's writes on what is gone
	// A leader change across a window end (OpLeaderChange, added after
	// the others): the leader is killed 0.2 s before an admin grant's
	// expiresAt and the standby replica must end the access within 2 s,
	// before the other replica takes over (about 4.8 s after the kill).
	// Both fail with the standby disabled (internal/controller/setup.go
	// without scopeinstance.NewStandby: "STANDBY: V may ... while no
	// replica led"); they stay in the fixed list so that `make test` runs
	// a takeover with a window closing in it, by bindings and by a gate.
	193, // V edit in [v1 v2] (RoleBindings of edit), ending soon; the leader change at once
	400, // V the extension's edit through an RBACPolicy over a selector (a gate), ending soon; the leader change two steps later
	// Eligible access (eligible.go, added after the others, from a stream
	// of their own): an approved request's grant must end at its end, and
	// when its policy is deleted. 169 fails with the end ignored (Assess
	// without its time-is-up case, Activation without expiresAt): "at the
	// end: ESCALATION: V may create gadgets in v2" (v1 was re-created).
	169,  // V (eligible through her group) requests 8 s of the extension's edit in [v1 v2], A approves, the admin re-creates v1, time passes the end
	1252, // D requests 8 s in [v2], A approves; V (not eligible) requests, refused; C (no approver) approves, refused; the admin deletes the policy while D's grant is active
}

// otherFindings are seeds that found something not fixed yet: not in the
// fixed list; replay them with ORIA_SEQFUZZ_SEEDS=other, and move them to
// finderSeeds with their fix. None at the moment.
var otherFindings = []Finder{}
