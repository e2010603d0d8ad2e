package seqfuzz

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

// Env is what every sequence shares: the cluster-admin client, the oria
// process, the ClusterRoles the personas are bound to, and one extension in
// FineGrained mode whose API (gadgets) the RBACPolicy grants are about.
type Env struct {
	Admin   client.Client
	Cluster *localcluster.Cluster
	Oria    *Oria
	// Ext is the ClusterExtension's name; CRD, Group and Plural its API.
	Ext, CRD, Group, Plural string
}

// The ClusterRoles the personas of every run are bound to (created once).
const (
	roleOriaWriter   = "seqfuzz-oria-writer"   // D: oria's kinds
	roleRoleWriter   = "seqfuzz-role-writer"   // C: ClusterRoles, no bind, no escalate
	roleStatusWriter = "seqfuzz-status-writer" // S: oria's status subresources
	roleRequester    = "seqfuzz-requester"     // V, D, A, C: AccessRequests (the guard decides the rest)
)

var oriaKinds = []string{"scopetemplates", "scopeinstances", "rbacpolicies"}

// NewEnv creates the shared fixtures and starts oria (its replicas' logs
// in dir).
func NewEnv(ctx context.Context, c *localcluster.Cluster, bin, dir string) (*Env, error) {
	admin, err := testutil.AdminClient(c)
	if err != nil {
		return nil, err
	}
	e := &Env{Admin: admin, Cluster: c, Ext: "seqfuzz-ext", Group: "seqfuzz.example.com", Plural: "gadgets"}
	e.CRD = e.Plural + "." + e.Group
	if e.Oria, err = newOria(c, admin, bin, dir); err != nil {
		return nil, err
	}
	write := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	status := make([]string, len(oriaKinds))
	for i, k := range oriaKinds {
		status[i] = k + "/status"
	}
	roles := []*rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: roleRequester}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{oriav1alpha1.GroupVersion.Group},
			Resources: []string{"accessrequests"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: roleOriaWriter}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: oriaKinds, Verbs: write}}},
		{ObjectMeta: metav1.ObjectMeta{Name: roleRoleWriter}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: write}}},
		{ObjectMeta: metav1.ObjectMeta{Name: roleStatusWriter}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: status, Verbs: []string{"get", "update", "patch"}},
			{APIGroups: []string{oriav1alpha1.GroupVersion.Group}, Resources: oriaKinds, Verbs: []string{"get", "list", "watch"}},
		}},
	}
	objs := []client.Object{testutil.ClusterExtension(e.Ext, oriav1alpha1.RBACModeFineGrained), testutil.CRD(e.Group, e.Plural, "Gadget", e.Ext)}
	for _, r := range roles {
		objs = append(objs, r)
	}
	for _, o := range objs {
		if err := admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	if err := e.Oria.Start(ctx); err != nil {
		return nil, err
	}
	// The extension's generated roles are what RBACPolicies bind.
	deadline := time.Now().Add(time.Minute)
	for {
		var role rbacv1.ClusterRole
		err := admin.Get(ctx, client.ObjectKey{Name: e.ExtRole("edit")}, &role)
		if err == nil {
			return e, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("oria did not generate %s: %w", e.ExtRole("edit"), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ExtRole is the name of the extension's generated role for access.
func (e *Env) ExtRole(access string) string { return e.CRD + "-" + access }

// As returns a client that impersonates user, in groups (the API server
// adds system:authenticated).
func (e *Env) As(user string, groups ...string) (client.Client, error) {
	cfg := rest.CopyConfig(e.Cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return client.New(cfg, client.Options{Scheme: e.Admin.Scheme(), Mapper: e.Admin.RESTMapper()})
}
