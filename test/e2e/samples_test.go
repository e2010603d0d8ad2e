package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/testutil"
	"github.com/operator-framework/oria/test/localcluster"
)

// sampleCase is one file of config/samples: the sentence of its
// "Needs first:" comment (verbatim, so that a changed comment fails here
// until the set-up follows it), and run, which creates exactly that, applies
// the sample as `kubectl apply -f` would and checks what its comments and
// the user guide promise.
type sampleCase struct {
	needs string
	run   func(t *testing.T)
}

// TestEachSampleAlone applies every file of config/samples on its own, in a
// subtest of its own, on a cluster where nothing of any sample exists:
// first what its "Needs first:" comment names, then the sample; the subtest
// removes both and waits until they are gone. A sample added without a
// case here fails the test.
func TestEachSampleAlone(t *testing.T) {
	runsBeside(t)
	files, err := filepath.Glob(filepath.Join(localcluster.RepoRoot(), "config", "samples", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	for name := range sampleCases {
		assert.Contains(t, names, name, "a case for a sample that does not exist")
	}

	// A clean cluster: other tests may have left a sample's namespace
	// terminating, or the namespaces the samples' comments ask for.
	var all []*unstructured.Unstructured
	for _, n := range names {
		all = append(all, readSample(t, n)...)
	}
	for _, ns := range []string{"foo", "bar", "gadget-system", "team-a"} {
		all = append(all, namespaceObject(ns, nil))
	}
	waitAbsent(t, all)

	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c, ok := sampleCases[name]
			require.True(t, ok, "config/samples/%s has no case in TestEachSampleAlone", name)
			assert.Equal(t, c.needs, needsFirst(t, name),
				"the sample's Needs-first comment is not what the test sets up first: change one or the other")
			start := time.Now()
			c.run(t)
			t.Logf("%s applied alone and checked in %s", name, time.Since(start).Round(time.Millisecond))
		})
	}
}

var sampleCases = map[string]sampleCase{
	"tour-extension.yaml": {
		needs: "nothing (the local control plane of make run has OLM v1's ClusterExtension CRD; another cluster needs OLM v1 installed).",
		run: func(t *testing.T) {
			applySample(t, "tour-extension.yaml")
			crdEstablished(t, "applications.argoproj.io")
			// Unmanaged (the default): the extension says so, nothing is
			// generated, nobody but cluster-admin may use the API.
			waitExtensionCondition(t, "argocd", metav1.ConditionFalse, oriav1alpha1.ReasonUnmanaged)
			var roles rbacv1.ClusterRoleList
			require.NoError(t, k8sClient.List(context.Background(), &roles, client.MatchingLabels{oriav1alpha1.LabelExtension: "argocd"}))
			assert.Empty(t, roles.Items)
			eventuallyAccess(t, false, developer("list", "team-a"), developer("list", "team-b"))
		},
	},
	"rbacpolicy-view-team-a.yaml": {
		needs: "tour-extension.yaml (the argocd extension and namespace team-a), annotated oria.operatorframework.io/rbac-mode=FineGrained.",
		run: func(t *testing.T) {
			fineGrainedArgocd(t)
			eventuallyAccess(t, false, developer("list", "team-a")) // FineGrained alone grants nothing
			applySample(t, "rbacpolicy-view-team-a.yaml")
			waitPolicyBound(t, "argocd-developers-view")
			eventuallyAccess(t, true, developer("list", "team-a"), developer("get", "team-a"), developer("watch", "team-a"))
			eventuallyAccess(t, false, developer("list", "team-b"), developer("create", "team-a"), developer("list", ""))
		},
	},
	"rbacpolicy-edit-team-a.yaml": {
		needs: "tour-extension.yaml (the argocd extension and namespace team-a), annotated oria.operatorframework.io/rbac-mode=FineGrained.",
		run: func(t *testing.T) {
			fineGrainedArgocd(t)
			eventuallyAccess(t, false, developer("create", "team-a"))
			applySample(t, "rbacpolicy-edit-team-a.yaml")
			waitPolicyBound(t, "argocd-developers-edit")
			eventuallyAccess(t, true, developer("create", "team-a"), developer("delete", "team-a"), developer("list", "team-a"))
			eventuallyAccess(t, false, developer("create", "team-b"), developer("list", "team-b"))
		},
	},
	"rbacpolicy-eligible.yaml": {
		needs: "tour-extension.yaml (the argocd extension and namespace team-a), annotated oria.operatorframework.io/rbac-mode=FineGrained.",
		run:   eligibleSample,
	},
	"rbacpolicy-temporary.yaml": {
		needs: "tour-extension.yaml (the argocd extension and namespace team-a), annotated oria.operatorframework.io/rbac-mode=FineGrained.",
		run:   temporarySample,
	},
	"rbacpolicy-admin-cluster.yaml": {
		needs: "tour-extension.yaml (the argocd extension), annotated oria.operatorframework.io/rbac-mode=FineGrained.",
		run: func(t *testing.T) {
			fineGrainedArgocd(t)
			alice := func(verb, ns string) testutil.Access {
				return testutil.Access{User: "alice", Verb: verb, Group: "argoproj.io", Resource: "applications", Namespace: ns}
			}
			eventuallyAccess(t, false, alice("list", ""))
			applySample(t, "rbacpolicy-admin-cluster.yaml")
			waitPolicyBound(t, "argocd-alice-admin")
			eventuallyAccess(t, true, alice("deletecollection", "team-b"), alice("list", ""), alice("create", "default"),
				testutil.Access{User: "alice", Verb: "get", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "applications.argoproj.io"})
			bob := alice("list", "team-a")
			bob.User = "bob"
			eventuallyAccess(t, false, bob) // alice only
		},
	},
	"rbacpolicy-selector.yaml": {
		needs: "tour-extension.yaml (the argocd extension), annotated oria.operatorframework.io/rbac-mode=FineGrained; namespaces labelled env=dev.",
		run: func(t *testing.T) {
			fineGrainedArgocd(t)
			dev := createNamespace(t, "dev", map[string]string{"env": "dev"})
			applySample(t, "rbacpolicy-selector.yaml")
			waitPolicyBound(t, "argocd-ci-dev")
			deployer := func(ns string) testutil.Access {
				return testutil.Access{User: "system:serviceaccount:ci:deployer", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ci"},
					Verb: "create", Group: "argoproj.io", Resource: "applications", Namespace: ns}
			}
			eventuallyAccess(t, true, deployer(dev))
			eventuallyAccess(t, false, deployer("team-a"))
			// A namespace labelled later is covered too.
			later := createNamespace(t, "dev-later", nil)
			eventuallyAccess(t, false, deployer(later))
			label(t, later, map[string]string{"env": "dev"})
			eventuallyAccess(t, true, deployer(later))
		},
	},
	"delegate-platform-team.yaml": {
		needs: "namespace team-a (tour-extension.yaml creates it).",
		run: func(t *testing.T) {
			needNamespace(t, "team-a", nil)
			applySample(t, "delegate-platform-team.yaml")
			pam := func(verb, group, resource, ns string) testutil.Access {
				return testutil.Access{User: "pam", Groups: []string{"platform-team"}, Verb: verb, Group: group, Resource: resource, Namespace: ns}
			}
			eventuallyAccess(t, true, pam("create", oriav1alpha1.GroupVersion.Group, "scopeinstances", ""), pam("create", "apps", "deployments", "team-a"))
			eventuallyAccess(t, false, pam("create", "apps", "deployments", "default"))
			// Through oria, pam binds in team-a what they hold there, and
			// nothing in another namespace.
			asPam := impersonate(t, "pam", "platform-team")
			name := testutil.UniqueName("platform")
			tmpl := testutil.ScopeTemplate(name, []oriav1alpha1.ClusterRoleTemplate{{Name: "edit"}},
				rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name})
			cleanup(t, tmpl)
			require.EventuallyWithT(t, func(c *assert.CollectT) { // once pam's ClusterRoleBinding reaches the authorizer
				err := asPam.Create(context.Background(), tmpl.DeepCopy())
				assert.True(c, err == nil || apierrors.IsAlreadyExists(err), "%v", err)
			}, testutil.Timeout, testutil.Interval)
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.NoError(c, asPam.Create(context.Background(), scopeInstance(name, name, "team-a"), client.DryRunAll))
			}, testutil.Timeout, testutil.Interval)
			refused(t, asPam.Create(context.Background(), scopeInstance(name, name, "default"), client.DryRunAll),
				`user "pam" may not bind ClusterRole "edit" in namespace "default"`)
		},
	},
	"scopetemplate.yaml": {
		needs: "nothing.",
		run: func(t *testing.T) {
			applySample(t, "scopetemplate.yaml")
			testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "foo"}},
				testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonValid})
		},
	},
	"scopeinstance.yaml": {
		needs: "scopetemplate.yaml; namespaces foo and bar (a missing one is reported as NamespaceNotFound and bound once it exists).",
		run: func(t *testing.T) {
			applySample(t, "scopetemplate.yaml")
			needNamespace(t, "foo", nil)
			needNamespace(t, "bar", nil)
			applySample(t, "scopeinstance.yaml")
			si, _ := testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "foo"}},
				testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonBound})
			assert.ElementsMatch(t, []string{"foo", "bar"}, si.Status.BoundNamespaces)
			eventuallyAccess(t, true, serviceAccount("foo-service-account", "foo", "list", "pods", "foo"),
				serviceAccount("foo-service-account", "bar", "delete", "services", "bar"))
			eventuallyAccess(t, false, serviceAccount("foo-service-account", "foo", "list", "secrets", "foo"),
				serviceAccount("foo-service-account", "default", "list", "pods", "default"))
		},
	},
	"scoped-operator-bundle.yaml": {
		needs: "namespace gadget-system (kubectl create namespace gadget-system), where OLM v1 would install the operator.",
		run: func(t *testing.T) {
			needNamespace(t, gadgetSystem, nil)
			applySample(t, "scoped-operator-bundle.yaml")
			testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.ScopeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "gadget-operator"}},
				testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonValid})
			// The template alone grants nothing: the admin's instance does.
			eventuallyAccess(t, false, serviceAccount("gadget-operator", gadgetSystem, "create", "configmaps", gadgetSystem))
		},
	},
	"scoped-operator-instance.yaml": {
		needs: "scoped-operator-bundle.yaml.",
		run: func(t *testing.T) {
			needNamespace(t, gadgetSystem, nil)
			applySample(t, "scoped-operator-bundle.yaml")
			applySample(t, "scoped-operator-instance.yaml")
			waitScopeInstanceReady(t, "gadget-operator")
			published(t, gadgetSystem)
			watched := createNamespace(t, "gadgets", map[string]string{gadgetLabel: "true"})
			other := createNamespace(t, "not-gadgets", nil)
			published(t, gadgetSystem, watched)
			eventuallyAccess(t, true, serviceAccount("gadget-operator", gadgetSystem, "create", "configmaps", watched))
			eventuallyAccess(t, false, serviceAccount("gadget-operator", gadgetSystem, "create", "configmaps", other))
		},
	},
	"scopeinstance-ceiling-serviceaccount.yaml": {
		needs: "nothing.",
		run: func(t *testing.T) {
			applySample(t, "scopeinstance-ceiling-serviceaccount.yaml")
			ceiling := func(verb, resource, ns string) testutil.Access {
				a := serviceAccount("widget-ceiling", "widget-system", verb, resource, ns)
				if resource == "rolebindings" {
					a.Group = rbacv1.GroupName
				}
				return a
			}
			eventuallyAccess(t, true, ceiling("create", "rolebindings", "widgets-a"), ceiling("patch", "rolebindings", "widgets-c"),
				ceiling("list", "pods", "widgets-b"))
			eventuallyAccess(t, false, ceiling("get", "secrets", "widgets-a"), ceiling("create", "rolebindings", "default"))
		},
	},
	"scopeinstance-ceiling.yaml": {
		needs: "scopeinstance-ceiling-serviceaccount.yaml (the namespaces and the ceiling ServiceAccount widget-system/widget-ceiling, which may pass on pods but not secrets); without the ServiceAccount the instance reports ServiceAccountNotFound and writes nothing.",
		run: func(t *testing.T) {
			applySample(t, "scopeinstance-ceiling-serviceaccount.yaml")
			applySample(t, "scopeinstance-ceiling.yaml")
			operator := func(resource, ns string) testutil.Access {
				return serviceAccount("widget-operator", "widget-system", "list", resource, ns)
			}
			eventuallyAccess(t, true, operator("pods", "widgets-a"), operator("pods", "widgets-b"), operator("pods", "widgets-c"))
			testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.ScopeInstance{ObjectMeta: metav1.ObjectMeta{Name: "widget-operator"}},
				testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionFalse, Reason: oriav1alpha1.ReasonForbidden,
					Message: []string{"system:serviceaccount:widget-system:widget-ceiling", "secrets"}})
			eventuallyAccess(t, false, operator("secrets", "widgets-a"), operator("secrets", "widgets-b"), operator("secrets", "widgets-c"))
		},
	},
}

// needsFirst returns the sentence of a sample's leading comment that starts
// with "Needs first:" (up to its first line ending in a full stop), without
// that prefix, its lines joined by spaces.
func needsFirst(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(localcluster.RepoRoot(), "config", "samples", name))
	require.NoError(t, err)
	defer f.Close()
	var parts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "#")
		if !ok {
			break
		}
		line = strings.TrimSpace(line)
		if parts == nil {
			rest, found := strings.CutPrefix(line, "Needs first:")
			if !found {
				continue
			}
			line = strings.TrimSpace(rest)
		}
		parts = append(parts, line)
		if strings.HasSuffix(line, ".") {
			break
		}
	}
	require.NotEmpty(t, parts, "config/samples/%s has no leading '# Needs first:' comment", name)
	return strings.Join(parts, " ")
}

// fineGrainedArgocd applies the tour's extension and annotates it
// FineGrained, as the RBACPolicy samples' comments ask.
func fineGrainedArgocd(t *testing.T) {
	t.Helper()
	applySample(t, "tour-extension.yaml")
	testutil.SetRBACMode(t, k8sClient, "argocd", oriav1alpha1.RBACModeFineGrained)
	waitExtensionCondition(t, "argocd", metav1.ConditionTrue, oriav1alpha1.ReasonFineGrained)
}

// developer is alice, a member of group developers, using argocd
// Applications.
func developer(verb, ns string) testutil.Access {
	return testutil.Access{User: "alice", Groups: []string{"developers"}, Verb: verb, Group: "argoproj.io", Resource: "applications", Namespace: ns}
}

func serviceAccount(name, saNamespace, verb, resource, ns string) testutil.Access {
	return testutil.Access{User: "system:serviceaccount:" + saNamespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNamespace}, Verb: verb, Resource: resource, Namespace: ns}
}

// waitPolicyBound waits for the policy's Ready=True, Bound.
func waitPolicyBound(t *testing.T, name string) {
	t.Helper()
	testutil.EventuallyCondition(t, k8sClient, &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}},
		testutil.Condition{Type: oriav1alpha1.TypeReady, Status: metav1.ConditionTrue, Reason: oriav1alpha1.ReasonBound})
}

func crdEstablished(t *testing.T, name string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, crd))
		established := slices.ContainsFunc(crd.Status.Conditions, func(cond apiextensionsv1.CustomResourceDefinitionCondition) bool {
			return cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue
		})
		assert.True(c, established, "CRD %s not established", name)
	}, testutil.Timeout, testutil.Interval)
}

// published waits until the gadget operator's ConfigMap lists exactly
// namespaces.
func published(t *testing.T, namespaces ...string) {
	t.Helper()
	want := slices.Sorted(slices.Values(namespaces))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cm := &corev1.ConfigMap{}
		require.NoError(c, k8sClient.Get(context.Background(), client.ObjectKey{Namespace: gadgetSystem, Name: gadgetScope}, cm))
		got := strings.Split(cm.Data["namespaces"], ",")
		slices.Sort(got)
		assert.Equal(c, want, got)
	}, testutil.Timeout, testutil.Interval)
}

func namespaceObject(name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Namespace")
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

// needNamespace creates the namespace of this name (a sample's fixed name)
// and, when the test ends, deletes it and waits until it is gone.
func needNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ns := namespaceObject(name, labels)
	require.NoError(t, k8sClient.Create(context.Background(), ns))
	t.Cleanup(func() { deleteObjects(t, []*unstructured.Unstructured{ns}) })
}

// waitAbsent waits until none of objs exists (namespaces other tests
// deleted may still be terminating).
func waitAbsent(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, u := range objs {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(u.GroupVersionKind())
			err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(u), got)
			assert.Truef(c, apierrors.IsNotFound(err), "%s %s/%s exists before the samples are applied: %s",
				u.GetKind(), u.GetNamespace(), u.GetName(), pending(got, err))
		}
	}, deleteTimeout, 500*time.Millisecond, "not a clean cluster")
}
