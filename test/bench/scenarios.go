package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/names"
	"github.com/operator-framework/oria/internal/testutil"
)

// Scenario names, as given to -scenarios and shown in the table.
const (
	scenarioExtensions    = "extensions"
	scenarioFanout        = "fanout"
	scenarioNewNamespaces = "new-namespaces" // second half of fanout
	scenarioIdle          = "idle"
)

// scenario is one part of the benchmark; it appends its rows to the report.
type scenario struct {
	name string
	run  func(*bench, context.Context) error
}

// scenarios run in this order: idle last, when everything has converged.
var scenarios = []scenario{
	{scenarioExtensions, (*bench).extensions},
	{scenarioFanout, (*bench).fanout},
	{scenarioIdle, (*bench).idle},
}

const (
	// setupWorkers create the scenarios' inputs with the unthrottled admin
	// client; setup is not timed.
	setupWorkers = 16
	// labelFanout marks the namespaces the fan-out's ScopeInstance selects.
	labelFanout = "bench.oria.operatorframework.io/fanout"
	// fanoutName names the fan-out's ScopeTemplate and ScopeInstance;
	// fanoutRole is the template's one inline ClusterRole.
	fanoutName = "bench-fanout"
	fanoutRole = "bench-fanout-reader"
	// newNamespaceTimeout bounds the wait for one new namespace's binding.
	newNamespaceTimeout = 30 * time.Second
)

var fanoutSubjects = []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "bench-readers"}}

// bench holds what the scenarios share.
type bench struct {
	cfg    *config
	admin  client.Client      // cluster-admin, not rate limited: setup only
	md     metadata.Interface // cluster-admin, for observers
	floor  *floor
	oria   *oriaProcess
	mem    *sampler
	cpPIDs []int // etcd and kube-apiserver
	report *Report
	logf   func(format string, args ...any)
}

// crdName identifies one benchmark CRD, <plural>.<group>, and its extension.
type crdName struct{ plural, kind, group, extension string }

func (c crdName) String() string { return c.plural + "." + c.group }

func extensionName(e int) string { return fmt.Sprintf("bench-ext-%03d", e) }

// benchCRDs returns the C CRDs of each of E extensions, in creation order.
func benchCRDs(e, c int) []crdName {
	out := make([]crdName, 0, e*c)
	for i := range e {
		for j := range c {
			out = append(out, crdName{plural: fmt.Sprintf("widget%ds", j), kind: fmt.Sprintf("Widget%d", j), group: fmt.Sprintf("ext%03d.bench.oria.example.com", i), extension: extensionName(i)})
		}
	}
	return out
}

// span is an open measurement window over oria's process.
type span struct {
	start      time.Time
	cpu, cpCPU float64
	requests   requestCounts
	name       string
}

func (b *bench) begin(ctx context.Context, name string) (*span, error) {
	req, err := b.oria.metrics.requests(ctx)
	if err != nil {
		return nil, err
	}
	cpu, err := procCPU(b.oria.Pid())
	if err != nil {
		return nil, err
	}
	b.mem.begin()
	b.oria.startCPUProfile(ctx, name)
	return &span{start: time.Now(), cpu: cpu, cpCPU: b.controlPlaneCPU(), requests: req, name: name}, nil
}

// end closes the window and fills r's resource figures.
func (b *bench) end(ctx context.Context, s *span, r *Result) error {
	r.WallSeconds = time.Since(s.start).Seconds()
	r.PeakRSS = b.mem.end()
	cpu, err := procCPU(b.oria.Pid())
	if err != nil {
		return err
	}
	r.CPUSeconds = cpu - s.cpu
	r.ControlPlaneCPUSeconds = b.controlPlaneCPU() - s.cpCPU
	req, err := b.oria.metrics.requests(ctx)
	if err != nil {
		return err
	}
	d := req.sub(s.requests)
	r.Writes, r.WritesTotal = d.writes()
	r.Reads = int(d["GET"])
	b.oria.saveHeapProfile(ctx, s.name)
	return nil
}

func (b *bench) controlPlaneCPU() float64 {
	var t float64
	for _, pid := range b.cpPIDs {
		if c, err := procCPU(pid); err == nil {
			t += c
		}
	}
	return t
}

// waitQuiet waits until oria has no queued work and makes no writes, and
// the control plane uses less than a quarter of a core, for two seconds in
// a row: timed phases then start from a settled cluster. It gives up with a
// warning after -timeout.
func (b *bench) waitQuiet(ctx context.Context, what string) error {
	const every, needed = 500 * time.Millisecond, 4
	deadline := time.Now().Add(b.cfg.timeout)
	var prevWrites int
	prevCP, calm := b.controlPlaneCPU(), 0
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-b.oria.Done():
			return errors.New("oria exited")
		case <-time.After(every):
		}
		busy, err := b.oria.metrics.busy(ctx)
		if err != nil {
			return err
		}
		req, err := b.oria.metrics.requests(ctx)
		if err != nil {
			return err
		}
		_, writes := req.writes()
		cp := b.controlPlaneCPU()
		if !busy && writes == prevWrites && (cp-prevCP)/every.Seconds() < 0.25 {
			calm++
		} else {
			calm = 0
		}
		if calm >= needed {
			return nil
		}
		prevWrites, prevCP = writes, cp
	}
	b.warn("cluster not quiet %s after %s; measuring anyway", what, b.cfg.timeout)
	return nil
}

func (b *bench) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.logf("warning: %s", msg)
	b.report.Warnings = append(b.report.Warnings, msg)
}

// converge runs one timed phase: start() triggers oria, then the observer
// must see n objects. It fills r.Seconds and r.Converged, and the resource
// figures up to the moment oria is quiet again.
func (b *bench) converge(ctx context.Context, r *Result, obs *observer, n int, start func(context.Context) error) error {
	s, err := b.begin(ctx, r.Name)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := start(ctx); err != nil {
		return err
	}
	last, err := obs.waitCount(ctx, n, b.cfg.timeout)
	if err != nil {
		r.Error = err.Error()
	} else {
		r.Converged, r.Seconds = true, last.Sub(t0).Seconds()
	}
	if err := b.waitQuiet(ctx, "after "+r.Name); err != nil {
		return err
	}
	return b.end(ctx, s, r)
}

// extensions is scenario 1: E extensions x C CRDs switched to Legacy.
func (b *bench) extensions(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	crds := benchCRDs(b.cfg.extensions, b.cfg.crds)
	r := &Result{Name: scenarioExtensions, Objects: 4 * len(crds)}
	b.report.Results = append(b.report.Results, r)

	schema := bigSchema(b.cfg.schemaKB << 10)
	b.logf("creating %d CRDs (%d KB schemas) and %d ClusterExtensions", len(crds), b.cfg.schemaKB, b.cfg.extensions)
	if err := parallel(ctx, setupWorkers, len(crds), func(ctx context.Context, i int) error {
		c := crds[i]
		crd := testutil.CRD(c.group, c.plural, c.kind, c.extension)
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema = schema
		return b.admin.Create(ctx, crd)
	}); err != nil {
		return fmt.Errorf("creating CRDs: %w", err)
	}
	if err := parallel(ctx, setupWorkers, b.cfg.extensions, func(ctx context.Context, i int) error {
		return b.admin.Create(ctx, testutil.ClusterExtension(extensionName(i), ""))
	}); err != nil {
		return fmt.Errorf("creating ClusterExtensions: %w", err)
	}
	if err := b.waitQuiet(ctx, "after creating CRDs"); err != nil {
		return err
	}

	if b.floor != nil {
		b.logf("floor: creating %d ClusterRoles", r.Objects)
		cp := b.controlPlaneCPU()
		d, err := b.floor.clusterRoles(ctx, crds)
		if err != nil {
			return err
		}
		r.FloorSeconds, r.FloorControlPlaneCPUSeconds = d.Seconds(), b.controlPlaneCPU()-cp
		if err := b.admin.DeleteAllOf(ctx, &rbacv1.ClusterRole{}, client.HasLabels{labelFloor}); err != nil {
			return fmt.Errorf("deleting the floor's ClusterRoles: %w", err)
		}
		if err := b.waitQuiet(ctx, "after the floor"); err != nil {
			return err
		}
	}

	b.logf("oria: switching %d ClusterExtensions to Legacy; waiting for %d ClusterRoles", b.cfg.extensions, r.Objects)
	sel := labels.SelectorFromSet(labels.Set{oriav1alpha1.LabelManagedBy: oriav1alpha1.ManagedByValue}).String() + "," + oriav1alpha1.LabelExtension
	obs, err := observe(ctx, b.md, clusterRolesGVR, sel)
	if err != nil {
		return err
	}
	return b.converge(ctx, r, obs, r.Objects, func(ctx context.Context) error {
		return parallel(ctx, setupWorkers, b.cfg.extensions, func(ctx context.Context, i int) error {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, oriav1alpha1.AnnotationRBACMode, oriav1alpha1.RBACModeLegacy)
			ce := testutil.ClusterExtension(extensionName(i), "")
			return b.admin.Patch(ctx, ce, client.RawPatch("application/merge-patch+json", []byte(patch)))
		})
	})
}

// fanout is scenario 2: one ScopeInstance selecting N namespaces, then M new
// namespaces one at a time.
func (b *bench) fanout(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &Result{Name: scenarioFanout, Objects: b.cfg.namespaces}
	b.report.Results = append(b.report.Results, r)
	selected := map[string]string{labelFanout: "true"}
	nsNames := make([]string, b.cfg.namespaces)
	for i := range nsNames {
		nsNames[i] = fmt.Sprintf("bench-fanout-%05d", i)
	}

	b.logf("creating %d namespaces and ScopeTemplate %s", len(nsNames), fanoutName)
	if err := parallel(ctx, setupWorkers, len(nsNames), func(ctx context.Context, i int) error {
		return b.admin.Create(ctx, testutil.Namespace(nsNames[i], selected))
	}); err != nil {
		return fmt.Errorf("creating namespaces: %w", err)
	}
	tmpl := &oriav1alpha1.ScopeTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: fanoutName},
		Spec: oriav1alpha1.ScopeTemplateSpec{
			ClusterRoles: []oriav1alpha1.ClusterRoleTemplate{{
				Name:  fanoutRole,
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
			}},
			BindingTemplate: oriav1alpha1.BindingTemplate{Subjects: fanoutSubjects},
		},
	}
	if err := b.admin.Create(ctx, tmpl); err != nil {
		return fmt.Errorf("creating ScopeTemplate: %w", err)
	}
	if err := b.waitQuiet(ctx, "after creating namespaces"); err != nil {
		return err
	}

	if b.floor != nil {
		b.logf("floor: creating %d RoleBindings", len(nsNames))
		cp := b.controlPlaneCPU()
		d, err := b.floor.roleBindings(ctx, nsNames, fanoutRole, fanoutSubjects)
		if err != nil {
			return err
		}
		r.FloorSeconds, r.FloorControlPlaneCPUSeconds = d.Seconds(), b.controlPlaneCPU()-cp
		if err := parallel(ctx, setupWorkers, len(nsNames), func(ctx context.Context, i int) error {
			return b.admin.DeleteAllOf(ctx, &rbacv1.RoleBinding{}, client.InNamespace(nsNames[i]), client.HasLabels{labelFloor})
		}); err != nil {
			return fmt.Errorf("deleting the floor's RoleBindings: %w", err)
		}
		if err := b.waitQuiet(ctx, "after the floor"); err != nil {
			return err
		}
	}

	b.logf("oria: creating ScopeInstance %s; waiting for %d RoleBindings", fanoutName, len(nsNames))
	obs, err := observe(ctx, b.md, roleBindingsGVR, oriav1alpha1.LabelScopeInstance+"="+names.LabelValue(fanoutName))
	if err != nil {
		return err
	}
	if err := b.converge(ctx, r, obs, len(nsNames), func(ctx context.Context) error {
		return b.admin.Create(ctx, &oriav1alpha1.ScopeInstance{
			ObjectMeta: metav1.ObjectMeta{Name: fanoutName},
			Spec: oriav1alpha1.ScopeInstanceSpec{
				ScopeTemplateName: fanoutName,
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: selected},
			},
		})
	}); err != nil || !r.Converged {
		return err
	}

	nr := &Result{Name: scenarioNewNamespaces, Objects: b.cfg.newNamespaces}
	b.report.Results = append(b.report.Results, nr)
	b.logf("oria: creating %d new namespaces one by one", b.cfg.newNamespaces)
	s, err := b.begin(ctx, nr.Name)
	if err != nil {
		return err
	}
	var lat []time.Duration
	for i := range b.cfg.newNamespaces {
		ns := fmt.Sprintf("bench-new-%04d", i)
		t0 := time.Now()
		if err := b.admin.Create(ctx, testutil.Namespace(ns, selected)); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
		at, err := obs.waitNamespace(ctx, ns, newNamespaceTimeout)
		if err != nil {
			nr.Error = err.Error()
			break
		}
		lat = append(lat, at.Sub(t0))
	}
	nr.Converged = len(lat) == b.cfg.newNamespaces
	nr.Latency = newLatency(lat)
	if err := b.waitQuiet(ctx, "after new namespaces"); err != nil {
		return err
	}
	return b.end(ctx, s, nr)
}

// idle is scenario 3: with everything converged, oria must not write.
func (b *bench) idle(ctx context.Context) error {
	r := &Result{Name: scenarioIdle}
	b.report.Results = append(b.report.Results, r)
	if err := b.waitQuiet(ctx, "before idle"); err != nil {
		return err
	}
	b.logf("idle: counting oria's writes for %ds", b.cfg.idleSeconds)
	s, err := b.begin(ctx, r.Name)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-b.oria.Done():
		return errors.New("oria exited")
	case <-time.After(time.Duration(b.cfg.idleSeconds) * time.Second):
	}
	r.Converged = true
	return b.end(ctx, s, r)
}

// bigSchema returns a deterministic structural openAPI schema of about size
// bytes of JSON, shaped like a real operator's: many documented fields of
// every type, nested objects and arrays.
func bigSchema(size int) *apiextensionsv1.JSONSchemaProps {
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Description: words(0, 30), Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
	root := &apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: words(1, 40),
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": {Type: "string", Description: words(2, 20)},
			"kind":       {Type: "string", Description: words(3, 20)},
			"metadata":   {Type: "object"},
			"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"conditions": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr(true),
				}}},
			}},
		},
	}
	for i := 0; ; i++ {
		spec.Properties[fmt.Sprintf("field%03d", i)] = field(i)
		if i%8 == 7 {
			root.Properties["spec"] = spec
			if b, err := root.Marshal(); err != nil || len(b) >= size {
				return root
			}
		}
	}
}

func field(i int) apiextensionsv1.JSONSchemaProps {
	d := words(i, 50)
	str := apiextensionsv1.JSONSchemaProps{Type: "string", Description: words(i+1, 25), MaxLength: ptr[int64](253)}
	switch i % 4 {
	case 0:
		return apiextensionsv1.JSONSchemaProps{Type: "string", Description: d, MaxLength: ptr[int64](63), Pattern: `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`}
	case 1:
		return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32", Description: d, Minimum: ptr(0.0), Maximum: ptr(65535.0)}
	case 2:
		return apiextensionsv1.JSONSchemaProps{Type: "array", Description: d, Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Required: []string{"name"},
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": str, "value": str, "valueFrom": str},
		}}}
	default:
		return apiextensionsv1.JSONSchemaProps{Type: "object", Description: d, Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"enabled":  {Type: "boolean", Description: words(i+2, 20)},
			"mode":     {Type: "string", Description: words(i+3, 20), Enum: []apiextensionsv1.JSON{{Raw: []byte(`"Auto"`)}, {Raw: []byte(`"Manual"`)}}},
			"replicas": {Type: "integer", Format: "int32", Description: words(i+4, 20)},
			"image":    str,
		}}
	}
}

var vocabulary = strings.Fields(`the operator controller reconciles resource field value when set defaults
to namespace cluster replicas image pull policy secret reference volume mount path port protocol
service account annotation label selector matches template specification status condition`)

// words returns n deterministic words of documentation text.
func words(seed, n int) string {
	w := make([]string, n)
	for j := range w {
		w[j] = vocabulary[(seed*7+j*13+j*j)%len(vocabulary)]
	}
	return strings.Join(w, " ") + "."
}
