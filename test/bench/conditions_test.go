package main

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The floor's condition, decoded as the observer sees it, is what the
// observer waits for; its removal leaves no condition behind.
func TestFloorCondition(t *testing.T) {
	decode := func(data []byte) *unstructured.Unstructured {
		t.Helper()
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(data, &u.Object); err != nil {
			t.Fatal(err)
		}
		return u
	}
	data, err := floorCondition("ext", floorConditionType, 5)
	if err != nil {
		t.Fatal(err)
	}
	u := decode(data)
	if u.GetName() != "ext" || u.GetKind() != "ClusterExtension" {
		t.Errorf("object = %s %s", u.GetKind(), u.GetName())
	}
	if !hasCondition(u, floorConditionType, metav1.ConditionTrue, "Legacy") {
		t.Errorf("hasCondition(%s, Legacy) = false for %s", floorConditionType, data)
	}
	if hasCondition(u, floorConditionType, metav1.ConditionTrue, "FineGrained") || hasCondition(u, "RBACManaged", metav1.ConditionTrue, "Legacy") {
		t.Error("hasCondition matched another reason or type")
	}

	data, err = floorCondition("ext", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	conds, found, _ := unstructured.NestedSlice(decode(data).Object, "status", "conditions")
	if !found || len(conds) != 0 {
		t.Errorf("removal applies conditions %v (found %v), want an empty list", conds, found)
	}
}

func TestHasCondition(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "Installed", "status": "True", "reason": "Succeeded"},
		map[string]any{"type": "RBACManaged", "status": "False", "reason": "Legacy"},
	}}}}
	if hasCondition(u, "RBACManaged", metav1.ConditionTrue, "Legacy") {
		t.Error("a False condition counted")
	}
	if !hasCondition(u, "Installed", metav1.ConditionTrue, "Succeeded") {
		t.Error("a True condition with the reason did not count")
	}
	if !hasCondition(u, "RBACManaged", metav1.ConditionFalse, "Legacy") {
		t.Error("a False condition with the reason did not count when False was asked for")
	}
	if hasCondition(&unstructured.Unstructured{Object: map[string]any{}}, "Installed", metav1.ConditionTrue, "Succeeded") {
		t.Error("an object without status counted")
	}
}

func TestMaxTime(t *testing.T) {
	a := time.Unix(10, 0)
	b := a.Add(time.Second)
	if maxTime(a, b) != b || maxTime(b, a) != b {
		t.Error("maxTime did not return the later time")
	}
}
