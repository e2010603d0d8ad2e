package cli

import (
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/eligibility"
)

func eligibleFor(name, ext string, ns []string, subj ...rbacv1.Subject) oriav1alpha1.RBACPolicy {
	return oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: oriav1alpha1.RBACPolicySpec{
		ExtensionName: ext, Access: oriav1alpha1.AccessEdit, Namespaces: ns, Subjects: subj,
		Eligibility: &oriav1alpha1.Eligibility{MaxDuration: metav1.Duration{Duration: time.Hour}}}}
}

func TestChoosePolicy(t *testing.T) {
	devs := rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "devs"}
	alice := eligibility.User{Name: "alice", Groups: []string{"devs"}}
	policies := []oriav1alpha1.RBACPolicy{
		eligibleFor("b-team-b", "argocd", []string{"team-b"}, devs),
		eligibleFor("a-team-a", "argocd", []string{"team-a"}, devs),
		{ObjectMeta: metav1.ObjectMeta{Name: "granted"}, Spec: oriav1alpha1.RBACPolicySpec{ExtensionName: "argocd", Access: oriav1alpha1.AccessEdit, Subjects: []rbacv1.Subject{devs}}},
	}
	o := RequestOptions{Extension: "argocd", Access: "edit", Namespaces: []string{"team-a"}, For: "1h"}
	p, as, err := ChoosePolicy(policies, o, alice)
	if err != nil || p.Name != "a-team-a" || as != devs {
		t.Fatalf("got %v %v %v", p, as, err)
	}
	r, err := o.Request(p, as, alice, time.Now())
	if err != nil || r.Spec.Requester != "alice" || r.Spec.EligibleAs.Name != "devs" || r.Spec.Duration.Duration != time.Hour || !strings.HasPrefix(r.Name, "req-alice-") {
		t.Fatalf("request %+v: %v", r, err)
	}
	if _, _, err := ChoosePolicy(policies, RequestOptions{Extension: "argocd", Access: "edit", Namespaces: []string{"team-c"}}, alice); err == nil ||
		!strings.Contains(err.Error(), `user "alice" (groups devs) is not eligible`) {
		t.Fatalf("team-c: %v", err)
	}
	if _, _, err := ChoosePolicy(policies, RequestOptions{Extension: "other", Access: "edit", Namespaces: []string{"team-a"}}, alice); err == nil ||
		!strings.Contains(err.Error(), "no eligible RBACPolicy") {
		t.Fatalf("other: %v", err)
	}
	if _, _, err := ChoosePolicy(policies, o, eligibility.User{Name: "bob"}); err == nil {
		t.Fatal("bob is not in devs")
	}
}

func TestRequestsTable(t *testing.T) {
	mk := func(name string, st oriav1alpha1.RequestState) oriav1alpha1.AccessRequest {
		r := oriav1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: oriav1alpha1.AccessRequestSpec{Requester: "alice", PolicyName: "p",
			Namespaces: []string{"team-a"}, Duration: metav1.Duration{Duration: 10 * time.Minute}, Reason: "INC-1"}}
		r.Status.State = st
		return r
	}
	all := []oriav1alpha1.AccessRequest{mk("r1", oriav1alpha1.StateRequested), mk("r2", oriav1alpha1.StateActive), mk("r3", oriav1alpha1.StateEnded)}
	for f, want := range map[RequestFilter]int{RequestsPending: 1, RequestsActive: 1, RequestsAll: 3} {
		if table, names := RequestsTable(all, f); len(table.Rows) != want || len(names) != want {
			t.Errorf("%s: %d rows, want %d", f, len(table.Rows), want)
		}
	}
}
