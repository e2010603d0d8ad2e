package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	ocv1 "github.com/operator-framework/operator-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// Scenario 1 converges when every extension's roles exist and its
// condition says so: oria's RBACManaged condition with reason Legacy, and
// for the floor floorConditionType, written the way oria writes its own.
const floorConditionType = "BenchFloor"

var clusterExtensionsGVR = ocv1.GroupVersion.WithResource("clusterextensions")

// observeConditions starts an observer of the ClusterExtensions whose
// condition condType has the given status and reason, and waits for its
// informer to sync; it stops with ctx.
func observeConditions(ctx context.Context, dyn dynamic.Interface, condType string, status metav1.ConditionStatus, reason string) (*observer, error) {
	o := newObserver()
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, clusterExtensionsGVR, metav1.NamespaceAll, 0, cache.Indexers{}, nil)
	check := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok && hasCondition(u, condType, status, reason) {
			o.record("", u.GetName())
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, obj any) { check(obj) },
	}); err != nil {
		return nil, err
	}
	go inf.Informer().RunWithContext(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.Informer().HasSynced) {
		return nil, fmt.Errorf("watching ClusterExtensions: not synced within 1m")
	}
	return o, nil
}

// hasCondition reports whether u's status has condition condType with the
// given status and reason.
func hasCondition(u *unstructured.Unstructured, condType string, status metav1.ConditionStatus, reason string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == condType {
			return m["status"] == string(status) && m["reason"] == reason
		}
	}
	return false
}

// floorCondition is the status apply of the floor's condition on the
// ClusterExtension name, the request oria sends for its own: a status
// holding one condition, as long as oria's Legacy message for c APIs. An
// empty condType applies a status without conditions, which removes the
// floor's.
func floorCondition(name, condType string, c int) ([]byte, error) {
	conds := []any{}
	if condType != "" {
		conds = append(conds, metav1.Condition{
			Type: condType, Status: metav1.ConditionTrue, Reason: "Legacy", ObservedGeneration: 1,
			LastTransitionTime: metav1.Now(),
			Message:            fmt.Sprintf("ClusterRoles for %d API(s) are in place and aggregated to the built-in admin, edit and view ClusterRoles", c),
		})
	}
	return json.Marshal(map[string]any{
		"apiVersion": ocv1.GroupVersion.String(),
		"kind":       ocv1.ClusterExtensionKind,
		"metadata":   map[string]any{"name": name},
		"status":     map[string]any{"conditions": conds},
	})
}

// applyFloorCondition applies floorCondition to the ClusterExtension name.
func applyFloorCondition(ctx context.Context, dyn dynamic.Interface, name, condType string, c int) error {
	data, err := floorCondition(name, condType, c)
	if err != nil {
		return err
	}
	_, err = dyn.Resource(clusterExtensionsGVR).Patch(ctx, name, types.ApplyPatchType, data, applyOptions, "status")
	return err
}
