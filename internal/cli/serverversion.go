package cli

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// ServerInfo is the version of oria's server, as its Deployment says it.
type ServerInfo struct {
	// Version is "" when the Deployment does not say.
	Version string `json:"version,omitempty"`
	// From says where Version was read, or why it is unknown.
	From string `json:"from"`
}

// ServerVersion reads the version of oria's Deployment in namespace.
func ServerVersion(ctx context.Context, c client.Reader, namespace string) (ServerInfo, error) {
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: DeploymentName}, &d); err != nil {
		if apierrors.IsNotFound(err) {
			return ServerInfo{From: fmt.Sprintf("no Deployment %s/%s", namespace, DeploymentName)}, nil
		}
		return ServerInfo{}, fmt.Errorf("reading Deployment %s/%s: %w", namespace, DeploymentName, err)
	}
	v, from := ServerVersionOf(&d)
	return ServerInfo{Version: v, From: from}, nil
}

// ServerVersionOf returns the version of oria a Deployment runs and where
// it was read: the LabelVersion of its pods (what the installer stamps),
// else the tag of its image; "" with the reason when neither says.
func ServerVersionOf(d *appsv1.Deployment) (string, string) {
	where := fmt.Sprintf("Deployment %s/%s", d.Namespace, d.Name)
	if v := d.Spec.Template.Labels[oriav1alpha1.LabelVersion]; v != "" {
		return v, fmt.Sprintf("label %s of the pods of %s", oriav1alpha1.LabelVersion, where)
	}
	var image string
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" || image == "" {
			image = c.Image
		}
	}
	if tag := imageTag(image); tag != "" && tag != "latest" {
		return tag, fmt.Sprintf("the tag of image %s of %s", image, where)
	}
	return "", fmt.Sprintf("%s has no %s label on its pods and its image %q has no version tag", where, oriav1alpha1.LabelVersion, image)
}

// imageTag returns the tag of an image reference, "" when it has none
// (registry:port/name@sha256:... included).
func imageTag(image string) string {
	image, _, _ = strings.Cut(image, "@")
	name := image[strings.LastIndex(image, "/")+1:]
	_, tag, _ := strings.Cut(name, ":")
	return tag
}
