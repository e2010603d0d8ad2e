package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ReportAPIVersion is the apiVersion of the plugin's -o json|yaml reports
// (kind StatusReport or AccessReport). They are printed, never served.
const ReportAPIVersion = "cli.oria.operatorframework.io/v1alpha1"

// Report returns a printable object of kind with the JSON fields of body
// (a struct), for the -o json|yaml|jsonpath printers.
func Report(kind string, body any) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding the %s: %w", kind, err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(b, &u.Object); err != nil {
		return nil, fmt.Errorf("encoding the %s: %w", kind, err)
	}
	u.SetAPIVersion(ReportAPIVersion)
	u.SetKind(kind)
	return u, nil
}

// StatusReport is the body of `kubectl oria status -o json|yaml`.
type StatusReport struct {
	Extensions []ExtensionStatus `json:"extensions"`
}

// AccessReport is the body of `kubectl oria access -o json|yaml`.
type AccessReport struct {
	Extension string `json:"extension"`
	// Namespace is the -n the report is limited to, empty for all.
	Namespace string      `json:"namespace,omitempty"`
	APIs      []API       `json:"apis"`
	Access    []AccessRow `json:"access"`
	// Pending are the time-bound grants of the extension whose window has
	// not opened yet: they grant nothing, so no row shows them.
	Pending []Grant `json:"pending,omitempty"`
}

// columns defines a table's columns; those after wide are shown only with
// -o wide.
func columns(names []string, wide ...string) []metav1.TableColumnDefinition {
	out := make([]metav1.TableColumnDefinition, 0, len(names)+len(wide))
	for _, n := range names {
		out = append(out, metav1.TableColumnDefinition{Name: n, Type: "string"})
	}
	for _, n := range wide {
		out = append(out, metav1.TableColumnDefinition{Name: n, Type: "string", Priority: 1})
	}
	return out
}

func row(cells ...string) metav1.TableRow {
	out := metav1.TableRow{Cells: make([]any, len(cells))}
	for i, c := range cells {
		out.Cells[i] = c
	}
	return out
}

// StatusTable is the status report as one table: per extension a line for
// the extension itself, one per API, one per role and one per grant (with
// the window of a time-bound grant and the time left).
func StatusTable(report []ExtensionStatus) *metav1.Table {
	t := statusColumns()
	for _, e := range report {
		mode := e.modeText()
		add := func(kind, name, detail, status string, window *GrantWindow, subjects ...string) {
			t.Rows = append(t.Rows, row(e.Name, mode, kind, name, detail, status, window.String(), "", strings.Join(subjects, ", ")))
		}
		if e.NotFound {
			add("ClusterExtension", e.Name, "not installed", "NotFound", nil)
		} else {
			add("ClusterExtension", e.Name, plural(len(e.APIs), "API"), "RBACManaged="+e.RBACManaged+" "+e.Reason, nil)
		}
		for _, a := range e.APIs {
			add("API", a.CRD, a.Scope, "", nil)
		}
		for _, r := range e.Roles {
			detail := r.Source
			if len(r.AggregatesTo) > 0 {
				detail += ", aggregated to " + strings.Join(r.AggregatesTo, "/")
			}
			status := ""
			switch r.Source {
			case SourceConflict:
				status = "Conflict"
			case SourceMissing:
				status = "Missing"
			}
			add("ClusterRole", r.Name, detail, status, nil)
		}
		for _, g := range e.Grants {
			t.Rows = append(t.Rows, grantRow(e.Name, mode, g))
		}
	}
	return t
}

// statusColumns is the status table without rows.
func statusColumns() *metav1.Table {
	return &metav1.Table{ColumnDefinitions: columns([]string{"EXTENSION", "MODE", "KIND", "NAME", "DETAIL", "STATUS", "WINDOW", "RECORD"}, "SUBJECTS")}
}

// modeText is the MODE cell of the extension's rows.
func (e ExtensionStatus) modeText() string {
	if e.ModeFromDefault {
		return e.Mode + " (default)"
	}
	return e.Mode
}

// grantRow is the status table's row of a grant of extension.
func grantRow(extension, mode string, g Grant) metav1.TableRow {
	return row(extension, mode, g.Kind, g.Name, g.Access+" "+g.Where, "Ready="+g.Ready+" "+g.Reason, g.Window.String(), RecordText(g),
		strings.Join(g.Subjects, ", "))
}

// AccessTable is the access report as a table; -o wide adds the verbs and
// the bindings.
func AccessTable(rows []AccessRow) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: columns([]string{"NAMESPACE", "SUBJECT", "API", "ACCESS", "VIA"}, "VERBS", "BINDINGS")}
	for _, r := range rows {
		t.Rows = append(t.Rows, row(r.Namespace, r.Subject, r.API, Describe(r), strings.Join(r.Via, "; "),
			strings.Join(r.Verbs, ","), strings.Join(r.Bindings, ", ")))
	}
	return t
}

// CanTable is the reverse lookup as a table; -o wide adds the verbs and
// the bindings.
func CanTable(rows []AccessRow) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: columns([]string{"EXTENSION", "NAMESPACE", "API", "ACCESS", "VIA"}, "VERBS", "BINDINGS")}
	for _, r := range rows {
		t.Rows = append(t.Rows, row(r.Extension, r.Namespace, r.API, Describe(r), strings.Join(r.Via, "; "),
			strings.Join(r.Verbs, ","), strings.Join(r.Bindings, ", ")))
	}
	return t
}

// PlanTable is a plan's changes as a table; -o wide adds what an update
// changes (a ClusterRole's rules) and for which object.
func PlanTable(changes []Change) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: columns([]string{"NAMESPACE", "ACTION", "KIND", "NAME", "ROLE", "SUBJECTS"}, "DETAIL", "FOR")}
	for _, c := range changes {
		t.Rows = append(t.Rows, row(cmp.Or(c.Namespace, "(cluster)"), actionOf(c), c.Kind, c.Name, c.Role, strings.Join(c.Subjects, ", "), c.Detail, c.Owner))
	}
	return t
}
