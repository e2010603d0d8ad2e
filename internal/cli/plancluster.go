package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/binding"
	"github.com/operator-framework/oria/internal/olm"
)

// The lists a plan reads (PlanState.Unread names those it may not).
const (
	ListNamespaces          = "namespaces"
	ListExtensions          = "clusterextensions"
	ListCRDs                = "customresourcedefinitions"
	ListTemplates           = "scopetemplates"
	ListInstances           = "scopeinstances"
	ListClusterRoles        = "clusterroles"
	ListRoleBindings        = "rolebindings"
	ListClusterRoleBindings = "clusterrolebindings"
)

// Decode reads the RBACPolicies, ScopeTemplates and ScopeInstances of a
// YAML or JSON stream (documents separated by ---, or a List) from source
// (a file name, for the skipped objects). Objects of other kinds are
// skipped, and returned as such; an oria kind that does not decode is an
// error.
func Decode(r io.Reader, source string, scheme *runtime.Scheme) ([]client.Object, []SkippedObject, error) {
	dec := yaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []client.Object
	var skipped []SkippedObject
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, skipped, nil
			}
			return nil, nil, fmt.Errorf("reading %s: %w", source, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		items := []unstructured.Unstructured{*u}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, nil, fmt.Errorf("reading %s: %w", source, err)
			}
			items = list.Items
		}
		for _, item := range items {
			gvk := item.GroupVersionKind()
			if why := skipReason(gvk, scheme); why != "" {
				skipped = append(skipped, SkippedObject{Kind: gvk.Kind, APIVersion: item.GetAPIVersion(),
					Name: strings.TrimPrefix(item.GetNamespace()+"/"+item.GetName(), "/"), Source: source, Reason: why})
				continue
			}
			obj, err := scheme.New(gvk)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %s %q: %w", source, gvk.Kind, item.GetName(), err)
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(item.Object, obj, true); err != nil {
				return nil, nil, fmt.Errorf("%s: %s %q: %w", source, gvk.Kind, item.GetName(), err)
			}
			co, ok := obj.(client.Object)
			if !ok || co.GetName() == "" {
				return nil, nil, fmt.Errorf("%s: %s: every object needs a name", source, gvk.Kind)
			}
			out = append(out, co)
		}
	}
}

// plannedKinds are the kinds plan takes.
var plannedKinds = []string{"RBACPolicy", "ScopeTemplate", "ScopeInstance"}

// skipReason says why plan skips an object of gvk, "" when it plans it.
func skipReason(gvk schema.GroupVersionKind, scheme *runtime.Scheme) string {
	switch {
	case gvk.Group != oriav1alpha1.GroupVersion.Group:
		return "not one of oria's kinds: plan takes RBACPolicies, ScopeTemplates and ScopeInstances"
	case gvk.Version != oriav1alpha1.GroupVersion.Version:
		return fmt.Sprintf("version %s of %s: plan knows %s", gvk.Version, gvk.Group, oriav1alpha1.GroupVersion.Version)
	case !slices.Contains(plannedKinds, gvk.Kind) || !scheme.Recognizes(gvk):
		return "not a kind plan takes: RBACPolicies, ScopeTemplates and ScopeInstances"
	}
	return ""
}

// Proposed returns obj as applying it would store it, and the operation:
// create when no object of its kind and name exists, else update, the
// existing object with obj's spec and obj's labels and annotations added.
func Proposed(ctx context.Context, c client.Reader, obj client.Object) (client.Object, string, error) {
	existing := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
		if apierrors.IsNotFound(err) {
			return obj, ActionCreate, nil
		}
		return nil, "", fmt.Errorf("reading %s %q: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
	switch e := existing.(type) {
	case *oriav1alpha1.RBACPolicy:
		e.Spec = obj.(*oriav1alpha1.RBACPolicy).Spec
	case *oriav1alpha1.ScopeTemplate:
		e.Spec = obj.(*oriav1alpha1.ScopeTemplate).Spec
	case *oriav1alpha1.ScopeInstance:
		e.Spec = obj.(*oriav1alpha1.ScopeInstance).Spec
	}
	existing.SetLabels(merge(existing.GetLabels(), obj.GetLabels()))
	existing.SetAnnotations(merge(existing.GetAnnotations(), obj.GetAnnotations()))
	existing.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	return existing, ActionUpdate, nil
}

func merge(a, b map[string]string) map[string]string {
	if len(b) == 0 {
		return a
	}
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// DryRun asks the API server to create or update obj without persisting it
// (the admission webhooks, oria's escalation guard among them, run on dry
// runs) and returns the verdict, with the object as the server would store
// it when admitted (its defaults applied), else obj.
func DryRun(ctx context.Context, c client.Client, obj client.Object, operation string) (PlannedObject, client.Object) {
	v := PlannedObject{Kind: obj.GetObjectKind().GroupVersionKind().Kind, Name: obj.GetName(), Operation: operation}
	o := obj.DeepCopyObject().(client.Object)
	var err error
	if operation == ActionCreate {
		err = c.Create(ctx, o, client.DryRunAll)
	} else {
		err = c.Update(ctx, o, client.DryRunAll)
	}
	if err != nil {
		v.Message = err.Error()
		return v, obj
	}
	v.Admitted = true
	o.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	return v, o
}

// ReadPlanState reads what Plan needs: namespaces, ClusterExtensions and
// their CRDs, ScopeTemplates, ScopeInstances, ClusterRoles and oria's
// bindings (those labelled with their ScopeInstance). A list the requester
// may not read is left empty and named in Unread (Plan says what that
// leaves unknown); any other error fails.
func ReadPlanState(ctx context.Context, c client.Reader) (*PlanState, error) {
	st := &PlanState{CRDOwner: map[string]string{}, Now: time.Now()}
	var (
		nss   corev1.NamespaceList
		exts  ocv1.ClusterExtensionList
		crds  apiextensionsv1.CustomResourceDefinitionList
		tmpls oriav1alpha1.ScopeTemplateList
		insts oriav1alpha1.ScopeInstanceList
		crs   rbacv1.ClusterRoleList
		rbs   rbacv1.RoleBindingList
		crbs  rbacv1.ClusterRoleBindingList
	)
	labelled := client.HasLabels{oriav1alpha1.LabelScopeInstance}
	for _, l := range []listing{
		{name: ListNamespaces, list: &nss},
		{name: ListExtensions, list: &exts},
		{name: ListCRDs, list: &crds, opts: []client.ListOption{client.MatchingLabelsSelector{Selector: olm.InstalledByExtension()}}},
		{name: ListTemplates, list: &tmpls},
		{name: ListInstances, list: &insts},
		{name: ListClusterRoles, list: &crs},
		{name: ListRoleBindings, list: &rbs, opts: []client.ListOption{labelled}},
		{name: ListClusterRoleBindings, list: &crbs, opts: []client.ListOption{labelled}},
	} {
		if err := c.List(ctx, l.list, l.opts...); apierrors.IsForbidden(err) {
			st.Unread = append(st.Unread, l.name)
		} else if err != nil {
			return nil, fmt.Errorf("listing %s: %w", l.name, err)
		}
	}
	for _, ns := range nss.Items {
		st.Namespaces = append(st.Namespaces, binding.Namespace{Name: ns.Name, Labels: ns.Labels, Terminating: ns.DeletionTimestamp != nil})
	}
	st.Extensions, st.Templates, st.Instances = exts.Items, tmpls.Items, insts.Items
	st.ClusterRoles, st.RoleBindings, st.ClusterRoleBindings = crs.Items, rbs.Items, crbs.Items
	for _, e := range exts.Items {
		for _, api := range ExtensionAPIs(crds.Items, e.Name) {
			st.CRDs, st.CRDOwner[api.CRD] = append(st.CRDs, api), e.Name
		}
	}
	return st, nil
}

// namedNamespaces reads, one by one, the namespaces that the planned
// objects and the cluster's instances name (spec.namespaces), for a
// requester who may not list namespaces: those found are added to
// st.Namespaces, those it may not get either to st.Assumed (Plan takes
// them to exist, and says so); those not found are missing.
func namedNamespaces(ctx context.Context, c client.Reader, st *PlanState, objs []client.Object) error {
	var named []string
	for _, o := range objs {
		switch o := o.(type) {
		case *oriav1alpha1.ScopeInstance:
			named = append(named, o.Spec.Namespaces...)
		case *oriav1alpha1.RBACPolicy:
			named = append(named, o.Spec.Namespaces...)
		}
	}
	for _, si := range st.Instances {
		named = append(named, si.Spec.Namespaces...)
	}
	slices.Sort(named)
	for _, name := range slices.Compact(named) {
		var ns corev1.Namespace
		switch err := c.Get(ctx, client.ObjectKey{Name: name}, &ns); {
		case err == nil:
			st.Namespaces = append(st.Namespaces, binding.Namespace{Name: ns.Name, Labels: ns.Labels, Terminating: ns.DeletionTimestamp != nil})
		case apierrors.IsForbidden(err):
			st.Namespaces = append(st.Namespaces, binding.Namespace{Name: name})
			st.Assumed = append(st.Assumed, name)
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("reading namespace %q: %w", name, err)
		}
	}
	return nil
}

// requester names who the API server says the plan runs as ("User
// \"alice\""), for the notes on what they may not read; "you" when the
// server does not say.
func requester(ctx context.Context, c client.Client) string {
	r := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, r); err != nil || r.Status.UserInfo.Username == "" {
		return "you"
	}
	return fmt.Sprintf("User %q", r.Status.UserInfo.Username)
}

// PlanFile plans the objects of a file: for each, what applying it does
// (create or update) and the guard's verdict on a dry run, then what it
// grants (Plan) against the cluster as it is. The file is judged as
// `kubectl apply -f` applies it, in order: an instance of a template that
// the file creates before it is judged against that template (the dry run
// carries it in AnnotationPlannedTemplate, which the guard reads on dry
// runs only).
//
// With an Impersonator, the bindings a ServiceAccount ceiling writes are
// dry run as that ServiceAccount (planceiling.go): those it may not write
// are listed as REFUSED.
func PlanFile(ctx context.Context, c client.Client, objs []client.Object, ceilings ...Impersonator) (*PlanReport, error) {
	var proposed []client.Object
	var verdicts []PlannedObject
	var notes []string
	as := ""                                            // who the API server says the plan runs as, once asked
	created := map[string]*oriav1alpha1.ScopeTemplate{} // templates the file creates, as the dry run stored them
	for _, obj := range objs {
		o, op, err := Proposed(ctx, c, obj)
		if apierrors.IsForbidden(err) {
			// kubectl apply could not read it either; the create's dry
			// run says whether it exists.
			o, op, err = obj, ActionCreate, nil
			if as == "" {
				as = requester(ctx, c)
			}
			notes = append(notes, fmt.Sprintf("%s %s cannot be read as %s: it is judged as a create", kindName(obj), obj.GetName(), as))
		}
		if err != nil {
			return nil, err
		}
		judged := o
		if si, ok := o.(*oriav1alpha1.ScopeInstance); ok && created[si.Spec.ScopeTemplateName] != nil {
			if judged, err = withPlannedTemplate(si, created[si.Spec.ScopeTemplateName]); err != nil {
				return nil, err
			}
		}
		v, stored := DryRun(ctx, c, judged, op)
		if t, ok := stored.(*oriav1alpha1.ScopeTemplate); ok && op == ActionCreate && v.Admitted {
			created[t.Name] = t
		}
		if judged != o {
			stored = o
		}
		verdicts, proposed = append(verdicts, v), append(proposed, stored)
	}
	st, err := ReadPlanState(ctx, c)
	if err != nil {
		return nil, err
	}
	if len(st.Unread) > 0 && as == "" {
		as = requester(ctx, c)
	}
	st.Requester = as
	if slices.Contains(st.Unread, ListNamespaces) {
		if err := namedNamespaces(ctx, c, st, proposed); err != nil {
			return nil, err
		}
	}
	report, checks := planJudged(st, proposed, verdicts)
	if len(checks) > 0 {
		var imp Impersonator
		if len(ceilings) > 0 {
			imp = ceilings[0]
		}
		checkCeilings(ctx, c, imp, &report, checks)
	}
	report.Notes = append(notes, report.Notes...)
	return &report, nil
}

// withPlannedTemplate returns a copy of si carrying t (as the dry run of
// the file's template stored it) in AnnotationPlannedTemplate.
func withPlannedTemplate(si *oriav1alpha1.ScopeInstance, t *oriav1alpha1.ScopeTemplate) (*oriav1alpha1.ScopeInstance, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encoding ScopeTemplate %q for the dry run of ScopeInstance %q: %w", t.Name, si.Name, err)
	}
	out := si.DeepCopy()
	out.SetAnnotations(merge(out.GetAnnotations(), map[string]string{oriav1alpha1.AnnotationPlannedTemplate: string(b)}))
	return out, nil
}

func kindName(o client.Object) string { return o.GetObjectKind().GroupVersionKind().Kind }
