package cli

import (
	"context"
	"fmt"
	"strings"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/olm"
	policymodel "github.com/operator-framework/oria/internal/policy"
)

// WhoAmI returns the requester's user name as the API server
// authenticates it (a SelfSubjectReview; with kubectl's --as, the
// impersonated user): the name the guard requires in a record of who
// granted or revoked (package record).
func WhoAmI(ctx context.Context, c client.Client) (string, error) {
	r := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, r); err != nil {
		return "", fmt.Errorf("asking the API server who you are (a SelfSubjectReview), to record who granted or revoked: %w", err)
	}
	if r.Status.UserInfo.Username == "" {
		return "", fmt.Errorf("the API server did not say who you are (a SelfSubjectReview), to record who granted or revoked")
	}
	return r.Status.UserInfo.Username, nil
}

// GrantCheck is what `kubectl oria grant` finds before it creates a
// policy: why it would grant nothing at all (Refusals: it is then not
// created), and what it would leave out of what was asked (Notes).
type GrantCheck struct {
	Refusals []string `json:"refusals,omitempty"`
	Notes    []string `json:"notes,omitempty"`
	// LeftOut are the APIs (CRD names) the grant covers but cannot grant
	// where it binds (cluster-scoped ones in namespaces).
	LeftOut []string `json:"leftOut,omitempty"`
}

func (g *GrantCheck) refuse(format string, args ...any) {
	g.Refusals = append(g.Refusals, fmt.Sprintf(format, args...))
}

func (g *GrantCheck) note(format string, args ...any) {
	g.Notes = append(g.Notes, fmt.Sprintf(format, args...))
}

// CheckGrant checks, as the RBACPolicy controller will judge it, that p
// (a policy grant made) grants something: its ClusterExtension exists and
// is in FineGrained or Legacy mode, provides every API --api names (and
// at least one), an API granted in namespaces is namespaced (a RoleBinding
// cannot grant a cluster-scoped one), and a namespace of -n exists. What
// the requester may not read is not checked, and noted.
func CheckGrant(ctx context.Context, c client.Reader, p *oriav1alpha1.RBACPolicy) (*GrantCheck, error) {
	g := &GrantCheck{}
	ext := p.Spec.ExtensionName
	ce := &ocv1.ClusterExtension{}
	switch err := c.Get(ctx, client.ObjectKey{Name: ext}, ce); {
	case apierrors.IsNotFound(err):
		g.refuse("ClusterExtension %q does not exist: a policy for it grants nothing until it is installed (kubectl oria status lists the extensions)", ext)
		return g, nil
	case apierrors.IsForbidden(err):
		g.note("you may not read ClusterExtension %q: its mode and APIs are not checked", ext)
	case err != nil:
		return nil, fmt.Errorf("reading ClusterExtension %q: %w", ext, err)
	default:
		switch mode, valid := extensionMode(ce); {
		case !valid:
			g.refuse("ClusterExtension %q has an invalid %s annotation (%q): oria grants nothing for it until it is fixed",
				ext, oriav1alpha1.AnnotationRBACMode, ce.Annotations[oriav1alpha1.AnnotationRBACMode])
			return g, nil
		case mode != oriav1alpha1.RBACModeFineGrained && mode != oriav1alpha1.RBACModeLegacy:
			g.refuse("ClusterExtension %q is in %s mode: oria grants nothing for it; an admin sets FineGrained first (kubectl annotate clusterextension %s %s=FineGrained)",
				ext, mode, ext, oriav1alpha1.AnnotationRBACMode)
			return g, nil
		}
		if err := checkAPIs(ctx, c, p, g); err != nil {
			return nil, err
		}
	}
	return g, checkNamespaces(ctx, c, p, g)
}

// checkAPIs checks the APIs p covers against those its extension provides.
func checkAPIs(ctx context.Context, c client.Reader, p *oriav1alpha1.RBACPolicy, g *GrantCheck) error {
	ext := p.Spec.ExtensionName
	var crds apiextensionsv1.CustomResourceDefinitionList
	switch err := c.List(ctx, &crds, client.MatchingLabelsSelector{Selector: olm.InstalledByExtension()}); {
	case apierrors.IsForbidden(err):
		g.note("you may not list CustomResourceDefinitions: the APIs of ClusterExtension %q are not checked", ext)
		return nil
	case err != nil:
		return fmt.Errorf("listing CustomResourceDefinitions: %w", err)
	}
	provided := map[string]API{}
	var names []string
	for _, api := range ExtensionAPIs(crds.Items, ext) {
		provided[api.CRD] = api
		names = append(names, api.CRD)
	}
	if len(names) == 0 {
		g.refuse("ClusterExtension %q provides no API (no CustomResourceDefinition that operator-controller installed for it): there is nothing to grant", ext)
		return nil
	}
	var covered []API
	for _, a := range p.Spec.APIs {
		api, ok := provided[policymodel.CRDName(a)]
		if !ok {
			g.refuse("ClusterExtension %q provides no API %s; its APIs: %s", ext, policymodel.CRDName(a), strings.Join(names, ", "))
			continue
		}
		covered = append(covered, api)
	}
	if len(p.Spec.APIs) == 0 {
		for _, n := range names {
			covered = append(covered, provided[n])
		}
	}
	if len(p.Spec.Namespaces) == 0 || len(covered) == 0 {
		return nil
	}
	var cluster, namespaced []string
	for _, api := range covered {
		if api.Scope == ScopeCluster {
			cluster = append(cluster, api.CRD)
		} else {
			namespaced = append(namespaced, api.CRD)
		}
	}
	switch {
	case len(cluster) == 0:
	case len(namespaced) == 0 || len(p.Spec.APIs) > 0:
		g.refuse("%s cluster-scoped: a RoleBinding in a namespace cannot grant it; grant it cluster-wide (--all-namespaces --api %s)%s",
			isAre(cluster), strings.Join(cluster, " --api "), map[bool]string{true: "", false: ", and the others in namespaces with a grant that leaves it out"}[len(namespaced) == 0])
	default:
		g.LeftOut = cluster
		g.note("%s cluster-scoped: a RoleBinding in a namespace cannot grant it, so it is left out; grant it with a second grant, --all-namespaces --api %s",
			isAre(cluster), strings.Join(cluster, " --api "))
	}
	return nil
}

// isAre writes "a is" or "a, b are".
func isAre(list []string) string {
	if len(list) == 1 {
		return list[0] + " is"
	}
	return strings.Join(list, ", ") + " are"
}

// checkNamespaces checks that a namespace p names exists (and is not being
// deleted).
func checkNamespaces(ctx context.Context, c client.Reader, p *oriav1alpha1.RBACPolicy, g *GrantCheck) error {
	var missing []string
	for _, name := range p.Spec.Namespaces {
		ns := &corev1.Namespace{}
		switch err := c.Get(ctx, client.ObjectKey{Name: name}, ns); {
		case apierrors.IsNotFound(err):
			missing = append(missing, name)
		case apierrors.IsForbidden(err):
			g.note("you may not read namespace %q: whether it exists is not checked", name)
			return nil
		case err != nil:
			return fmt.Errorf("reading namespace %q: %w", name, err)
		case ns.DeletionTimestamp != nil:
			missing = append(missing, name+" (being deleted)")
		}
	}
	switch {
	case len(missing) == 0:
	case len(missing) == len(p.Spec.Namespaces):
		g.refuse("no namespace of -n exists: %s; nothing would be granted until one is created", strings.Join(missing, ", "))
	default:
		g.note("namespace %s does not exist: nothing is granted there until it is created", strings.Join(missing, ", "))
	}
	return nil
}

// bindingChanges counts the bindings a plan writes (creates or updates)
// and those of them a ceiling refuses.
func bindingChanges(r *PlanReport) (written, refusedByCeiling int) {
	for _, c := range r.Changes {
		if (c.Kind != "RoleBinding" && c.Kind != "ClusterRoleBinding") || c.Action == ActionDelete {
			continue
		}
		written++
		if c.Refused {
			refusedByCeiling++
		}
	}
	return written, refusedByCeiling
}

// ceilingRefusal says why a grant with a ceiling grants nothing: its
// ServiceAccount may write none of the bindings (the dry runs as it); ""
// when it may write one, or the grant has no ceiling.
func ceilingRefusal(p *oriav1alpha1.RBACPolicy, r *PlanReport) string {
	sa := p.Spec.ServiceAccount
	if sa == nil {
		return ""
	}
	written, refused := bindingChanges(r)
	if written == 0 || refused < written {
		return ""
	}
	return fmt.Sprintf("it would grant nothing: ServiceAccount %s/%s (--ceiling) may write none of its %s (see the notes)",
		sa.Namespace, sa.Name, plural(written, "binding"))
}

// ceilingPartial says how much of a grant its ceiling refuses, when it
// refuses some of its bindings and not all ("" otherwise).
func ceilingPartial(r *PlanReport) string {
	written, refused := bindingChanges(r)
	if refused == 0 || refused == written {
		return ""
	}
	return fmt.Sprintf("the ceiling refuses %d of the %s: they are not written, and the grant is in part (the notes above name them)",
		refused, plural(written, "binding"))
}
