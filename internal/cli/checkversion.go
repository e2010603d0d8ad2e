package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// OutsideLeaseNamespace is where an oria that runs outside the cluster
// (make run) holds its leader-election Lease: oria's default namespace
// outside a pod (cmd/oria's podNamespace).
const OutsideLeaseNamespace = "kube-system"

// OutsideURL returns the URL the API server calls the guard at when oria
// runs outside the cluster, as `make run` runs it: no Deployment in oria's
// namespace, and the guard's webhook names a URL instead of a Service.
// "" otherwise.
func OutsideURL(f *CheckFacts) string {
	if f.Deployment != nil || f.DeploymentErr != nil {
		return ""
	}
	for i := range f.Webhooks {
		if wh := guardWebhook(&f.Webhooks[i]); wh != nil && wh.ClientConfig.URL != nil && wh.ClientConfig.Service == nil {
			return *wh.ClientConfig.URL
		}
	}
	return ""
}

// crdVersions returns the oria versions the version labels of oria's CRDs
// name, sorted and each once, and the CRDs by version.
func crdVersions(f *CheckFacts) ([]string, map[string][]string) {
	by := map[string][]string{}
	var out []string
	for _, name := range OriaCRDs {
		crd := f.CRDs[name].CRD
		if crd == nil || crd.Labels[oriav1alpha1.LabelVersion] == "" {
			continue
		}
		v := crd.Labels[oriav1alpha1.LabelVersion]
		if by[v] == nil {
			out = append(out, v)
		}
		by[v] = append(by[v], name)
	}
	slices.Sort(out)
	return out, by
}

// serverVersion returns the version of oria installed on the cluster and
// where it was read: its Deployment's (ServerVersionOf), else the version
// label of its CRDs when they agree; "" with the reason when neither says.
func serverVersion(f *CheckFacts) (string, string) {
	if f.Deployment != nil {
		if v, from := ServerVersionOf(f.Deployment); v != "" {
			return v, from
		}
	}
	if vs, _ := crdVersions(f); len(vs) == 1 {
		return vs[0], "label " + oriav1alpha1.LabelVersion + " of oria's CRDs"
	}
	if f.Deployment != nil {
		_, from := ServerVersionOf(f.Deployment)
		return "", from
	}
	return "", ""
}

// versionVerdict checks that the plugin and oria's install are the same
// release, on one line: a plugin of another release is one cause, whatever
// number of objects show it.
func versionVerdict(f *CheckFacts) Verdict {
	v := Verdict{Check: "versions"}
	if f.Deployment != nil {
		v.Object, v.Namespace = "deployment.apps/"+DeploymentName, f.Namespace
	} else if len(OriaCRDs) > 0 {
		v.Object = crdObject + OriaCRDs[0]
	}
	server, from := serverVersion(f)
	// An install half upgraded: its CRDs at one version (or several), its
	// Deployment at another.
	if vs, by := crdVersions(f); len(vs) > 1 || (len(vs) == 1 && server != "" && vs[0] != server) {
		var parts []string
		for _, cv := range vs {
			parts = append(parts, fmt.Sprintf("%s at %s", strings.Join(by[cv], ", "), cv))
		}
		msg := "oria's CRDs are at another version than its server: " + strings.Join(parts, "; ")
		if server != "" {
			msg += fmt.Sprintf("; the server is %s (%s)", server, from)
		}
		return verdictFailed(v, msg, "apply the install.yaml of one release (kubectl apply --server-side -f install.yaml): it sets the CRDs and the Deployment together")
	}
	outside := OutsideURL(f)
	switch {
	case !released(f.PluginVersion):
		return verdictWarning(v, fmt.Sprintf("the plugin is a development build (%s): not compared with the server (%s)", f.PluginVersion, cmp.Or(server, "unknown")),
			"use a released kubectl-oria, or build it with make build (which stamps VERSION)")
	case server == "" && outside != "":
		return verdictSkipped(v, fmt.Sprintf("plugin %s; oria runs outside the cluster, and its CRDs carry no %s label: the server's version is not known here", f.PluginVersion, oriav1alpha1.LabelVersion))
	case server == "" && f.Deployment == nil:
		return verdictSkipped(v, fmt.Sprintf("plugin %s; the server's version is not known without Deployment %s/%s", f.PluginVersion, f.Namespace, DeploymentName))
	case server == "":
		return verdictWarning(v, fmt.Sprintf("plugin %s; the server's version is unknown (%s)", f.PluginVersion, from),
			"install from a release's install.yaml (make build-installer stamps VERSION) to have the version checked")
	case server != f.PluginVersion:
		return verdictFailed(v, fmt.Sprintf("plugin %s, but the server is %s (%s): version skew, which the other checks do not count again", f.PluginVersion, server, from),
			fmt.Sprintf("use kubectl-oria %s, or upgrade oria to %s (kubectl krew install --manifest-url=<release %s>/oria.yaml installs that plugin; kubectl apply --server-side -f <release %s>/install.yaml that server)",
				server, f.PluginVersion, server, f.PluginVersion))
	}
	return verdictOK(v, fmt.Sprintf("plugin and server are both %s", server))
}
