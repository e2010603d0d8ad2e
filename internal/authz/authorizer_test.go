package authz

import (
	"context"
	"errors"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestDeniedFailsClosedOnDeadline: reviews cut short by the request's
// deadline are not taken as allowed.
func TestDeniedFailsClosedOnDeadline(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	a, err := New(c, c, NoRules{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	secrets := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}
	_, err = a.Denied(ctx, authenticationv1.UserInfo{Username: "bob"}, Expand(secrets, ""), 5)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// TestNewRequiresItsDependencies: an Authorizer without a client, a reader
// or a rule source is a start-up error, not one that fails later.
func TestNewRequiresItsDependencies(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	for name, args := range map[string]func() (*Authorizer, error){
		"no client":      func() (*Authorizer, error) { return New(nil, c, NoRules{}) },
		"no reader":      func() (*Authorizer, error) { return New(c, nil, NoRules{}) },
		"no rule source": func() (*Authorizer, error) { return New(c, c, nil) },
	} {
		if _, err := args(); err == nil {
			t.Errorf("%s: New returned no error", name)
		}
	}
}
