// Package testutil holds helpers shared by oria's integration and end-to-end
// suites: starting the local control plane once per package, objects shaped
// like the ones operator-controller installs, access checks through the real
// RBAC authorizer, and a client that counts writes.
package testutil

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// UniqueName returns prefix plus a random suffix, so that each test works on
// its own objects in a shared control plane.
func UniqueName(prefix string) string {
	return prefix + "-" + rand.String(6)
}

// ClusterExtension returns a valid ClusterExtension as a user would create
// it, with the rbac-mode annotation set when mode is not empty.
func ClusterExtension(name string, mode oriav1alpha1.RBACMode) *ocv1.ClusterExtension {
	ce := &ocv1.ClusterExtension{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: ocv1.ClusterExtensionSpec{
			Namespace:      "default",
			ServiceAccount: ocv1.ServiceAccountReference{Name: "installer"},
			Source: ocv1.SourceConfig{
				SourceType: ocv1.SourceTypeCatalog,
				Catalog:    &ocv1.CatalogFilter{PackageName: name},
			},
		},
	}
	if mode != "" {
		ce.Annotations = map[string]string{oriav1alpha1.AnnotationRBACMode: string(mode)}
	}
	return ce
}

// CRD returns a namespaced CustomResourceDefinition for group/plural,
// labelled the way operator-controller labels the CRDs it installs for the
// named ClusterExtension (no labels when extension is empty).
func CRD(group, plural, kind, extension string) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List",
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:                   "object",
					XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
	if extension != "" {
		crd.Labels = map[string]string{
			oriav1alpha1.LabelOLMOwnerKind: oriav1alpha1.OLMOwnerKindClusterExtension,
			oriav1alpha1.LabelOLMOwnerName: extension,
		}
	}
	return crd
}

// Namespace returns a namespace with the given labels.
func Namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// Access describes one access check.
type Access struct {
	User      string
	Groups    []string
	Verb      string
	Group     string
	Resource  string
	Namespace string // empty: cluster scope (or all namespaces for list)
	Name      string
}

func (a Access) String() string {
	return fmt.Sprintf("%s%v %s %s.%s ns=%q name=%q", a.User, a.Groups, a.Verb, a.Resource, a.Group, a.Namespace, a.Name)
}

// Allowed asks the API server's real authorizer (SubjectAccessReview)
// whether the access is allowed.
func Allowed(ctx context.Context, c client.Client, a Access) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   a.User,
		Groups: a.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.Verb, Group: a.Group, Resource: a.Resource, Namespace: a.Namespace, Name: a.Name,
		},
	}}
	if err := c.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("SubjectAccessReview %s: %w", a, err)
	}
	return sar.Status.Allowed, nil
}

// WriteCounter counts the write requests made through a client.
type WriteCounter struct {
	mu     sync.Mutex
	total  atomic.Int64
	byVerb map[string]int
}

// Total returns the number of writes so far.
func (w *WriteCounter) Total() int64 { return w.total.Load() }

// Reset sets the counts to zero.
func (w *WriteCounter) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total.Store(0)
	w.byVerb = nil
}

// String lists the writes by verb and kind, for failure messages.
func (w *WriteCounter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprint(w.byVerb)
}

func (w *WriteCounter) add(verb string, obj any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byVerb == nil {
		w.byVerb = map[string]int{}
	}
	kind := fmt.Sprintf("%T", obj)
	switch o := obj.(type) {
	case client.Object:
		kind += "/" + o.GetName()
	case interface{ GetName() *string }:
		if n := o.GetName(); n != nil {
			kind += "/" + *n
		}
	}
	w.byVerb[verb+" "+kind]++
	w.total.Add(1)
}

// CountingClient wraps c so that every write (create, update, patch, apply,
// delete, and their status variants) is counted in the returned counter.
func CountingClient(c client.Client) (client.Client, *WriteCounter) {
	w := &WriteCounter{}
	return &countingClient{Client: c, w: w}, w
}

type countingClient struct {
	client.Client
	w *WriteCounter
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.w.add("create", obj)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.w.add("update", obj)
	return c.Client.Update(ctx, obj, opts...)
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.w.add("patch", obj)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.w.add("apply", obj)
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.w.add("delete", obj)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *countingClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	c.w.add("deleteallof", obj)
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c *countingClient) Status() client.SubResourceWriter {
	return &countingSubResource{SubResourceWriter: c.Client.Status(), w: c.w, sub: "status"}
}

func (c *countingClient) SubResource(sub string) client.SubResourceClient {
	return &countingSubResourceClient{SubResourceClient: c.Client.SubResource(sub), w: c.w, sub: sub}
}

type countingSubResource struct {
	client.SubResourceWriter
	w   *WriteCounter
	sub string
}

func (s *countingSubResource) Create(ctx context.Context, obj client.Object, sub client.Object, opts ...client.SubResourceCreateOption) error {
	s.w.add(s.sub+" create", obj)
	return s.SubResourceWriter.Create(ctx, obj, sub, opts...)
}

func (s *countingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.w.add(s.sub+" update", obj)
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s *countingSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.w.add(s.sub+" patch", obj)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (s *countingSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	s.w.add(s.sub+" apply", obj)
	return s.SubResourceWriter.Apply(ctx, obj, opts...)
}

type countingSubResourceClient struct {
	client.SubResourceClient
	w   *WriteCounter
	sub string
}

func (s *countingSubResourceClient) Create(ctx context.Context, obj client.Object, sub client.Object, opts ...client.SubResourceCreateOption) error {
	s.w.add(s.sub+" create", obj)
	return s.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (s *countingSubResourceClient) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.w.add(s.sub+" update", obj)
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s *countingSubResourceClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.w.add(s.sub+" patch", obj)
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (s *countingSubResourceClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	s.w.add(s.sub+" apply", obj)
	return s.SubResourceClient.Apply(ctx, obj, opts...)
}

// User is an RBAC subject for the named user.
func User(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, Name: name, APIGroup: rbacv1.GroupName}
}

// ServiceAccount is an RBAC subject for a ServiceAccount (ns may be empty:
// in a ScopeTemplate that means the namespace of each binding).
func ServiceAccount(name, ns string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}
}

// PodReaderRules returns rules that get, list and watch pods.
func PodReaderRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}
}

// ScopeTemplate returns a ScopeTemplate with the ClusterRoles and the
// binding subjects.
func ScopeTemplate(name string, roles []oriav1alpha1.ClusterRoleTemplate, subjects ...rbacv1.Subject) *oriav1alpha1.ScopeTemplate {
	return &oriav1alpha1.ScopeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles:    roles,
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: subjects},
		},
	}
}
