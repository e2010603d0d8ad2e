// Package admission is oria's escalation guard: a validating admission
// webhook that admits a change to a ScopeTemplate, ScopeInstance or
// RBACPolicy only if the user making it could create the resulting roles
// and bindings themselves, by Kubernetes' own rule against privilege
// escalation ("bind" on the role where it is bound or every permission it
// grants there; "escalate" or every permission to write a role). oria holds
// bind and escalate on every ClusterRole; without the guard anyone allowed to
// write oria's objects would hold them too.
//
// What an object grants, and where, comes from the same pure functions the
// controllers use: binding.Roles and binding.InstanceGrants for the binding
// layer, policy.Compile for policies. Whether the requester may grant it is
// package authz's answer (the requester's RBAC rules held in memory, then
// SubjectAccessReviews); this package holds the webhook itself: decoding,
// what a write changes, and the verdict.
package admission

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/authz"
	"github.com/operator-framework/oria/internal/rbacrules"
	"github.com/operator-framework/oria/internal/record"
)

// Path is the URL path the guard is served at.
const Path = "/validate-oria-operatorframework-io-v1alpha1"

// WebhookName is the webhook's name in the ValidatingWebhookConfiguration.
// The API server quotes it in every refusal, including "failed calling
// webhook" when oria is not running, so it says what refuses.
const WebhookName = "escalation-guard.oria.operatorframework.io"

// checkTimeout bounds the checks of one request; the webhook's own timeout
// (timeoutSeconds in the marker below) is longer, so a slow check ends in
// an explained refusal rather than the API server's timeout.
const checkTimeout = 12 * time.Second

// The webhook configuration is generated from this marker into
// config/webhook/manifests.yaml (make manifests).
// +kubebuilder:webhook:path=/validate-oria-operatorframework-io-v1alpha1,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,groups=oria.operatorframework.io,resources=scopetemplates;scopeinstances;rbacpolicies;accessrequests,verbs=create;update,versions=v1alpha1,name=escalation-guard.oria.operatorframework.io,admissionReviewVersions=v1,timeoutSeconds=15

// The guard asks the API server's authorizer about the requester, and reads
// the roles, templates, instances and CRDs an object refers to.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=scopetemplates;scopeinstances,verbs=get;list
// +kubebuilder:rbac:groups=oria.operatorframework.io,resources=rbacpolicies,verbs=get
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=list

// Guard is the admission handler for oria's kinds.
type Guard struct {
	// authz answers what the requester may do and grant.
	authz *authz.Authorizer
	// reader reads what an object refers to from the API server (not a
	// cache: a check must see the instance created a moment ago).
	reader client.Reader

	decoder admission.Decoder
}

// New returns a guard that checks requesters with az and reads from
// reader; both are required.
func New(az *authz.Authorizer, reader client.Reader, scheme *runtime.Scheme) (*Guard, error) {
	if az == nil || reader == nil || scheme == nil {
		return nil, errors.New("admission.New: an authorizer, a reader and a scheme are required")
	}
	return &Guard{authz: az, reader: reader, decoder: admission.NewDecoder(scheme)}, nil
}

// Setup registers the guard on mgr's webhook server at Path: it checks
// requesters against their RBAC rules held in memory (the cache of every
// RBAC object, rbacrules.AddToManager), then SubjectAccessReviews.
func Setup(mgr ctrl.Manager) error {
	rc, err := rbacrules.AddToManager(mgr)
	if err != nil {
		return err
	}
	az, err := authz.New(mgr.GetClient(), mgr.GetAPIReader(), authz.NewCachedRules(rc))
	if err != nil {
		return err
	}
	g, err := New(az, mgr.GetAPIReader(), mgr.GetScheme())
	if err != nil {
		return err
	}
	mgr.GetWebhookServer().Register(Path, &admission.Webhook{Handler: g})
	return nil
}

// Handle admits or refuses one request.
func (g *Guard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	if req.SubResource != "" {
		return admission.Allowed("only the spec is checked")
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	problems, err := g.check(ctx, req)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "escalation check failed", "kind", req.Kind.Kind, "name", req.Name, "user", req.UserInfo.Username)
		return admission.Errored(http.StatusInternalServerError,
			fmt.Errorf("oria: could not check that user %q may grant what this %s grants, so it is refused: %w", req.UserInfo.Username, req.Kind.Kind, err))
	}
	if len(problems) > 0 {
		return admission.Denied("oria: " + strings.Join(problems, "; "))
	}
	return admission.Allowed("")
}

// check decodes the object (and the old one on update) and returns what the
// requester may not do. A change is checked when it could grant something:
// a create, a spec change, a change of who owns spec fields under
// server-side apply (taking co-ownership of a grant is asserting it), a
// change of the metadata oria derives ownership from, and any change of a
// policy's compiled objects. Everything else (an unrelated label, an
// annotation) is admitted without a review. A create or a spec change that
// the controller would call a spec error is refused first, for everyone
// (SpecErrors). Before all that, and for everyone, a record of who granted
// or revoked (package record) must name the requester: pure, no API call.
func (g *Guard) check(ctx context.Context, req admission.Request) ([]string, error) {
	old, obj, err := g.decode(req)
	if err != nil || obj == nil {
		return nil, err
	}
	// A request for eligible access has rules of its own (package
	// eligibility), for everyone.
	if r, ok := obj.(*oriav1alpha1.AccessRequest); ok {
		return g.checkAccessRequest(ctx, req.UserInfo, old, r)
	}
	// Who granted or revoked is the requester, for everyone (package
	// record); pure, no round trip.
	var before map[string]string
	if old != nil {
		before = old.GetAnnotations()
	}
	if problems := record.Check(before, obj.GetAnnotations(), old == nil, req.UserInfo.Username, time.Now()); len(problems) > 0 {
		return problems, nil
	}
	c := classify(old, obj)
	if !c.needsCheck() {
		return nil, nil
	}
	if c.spec {
		// Invalid for everyone, admins included (see SpecErrors).
		if problems := SpecErrors(obj); len(problems) > 0 {
			return problems, nil
		}
	}
	// Whether the requester may do everything (then nothing else matters)
	// is asked while the rest is checked: one round trip less for everyone
	// else. The rest is not cancelled for those who may: for them it is
	// short (their rules cover every grant), and a cancelled request would
	// only be logged as an error.
	user := req.UserInfo
	type answer struct {
		ok  bool
		err error
	}
	unrestricted := make(chan answer, 1)
	go func() {
		ok, err := g.authz.Unrestricted(ctx, user)
		unrestricted <- answer{ok, err}
	}()
	problems, err := g.checkRestricted(ctx, user, req.Kind.Kind, c, old, obj, req.DryRun != nil && *req.DryRun)
	if u := <-unrestricted; u.err != nil || u.ok {
		return nil, u.err
	}
	if len(problems) > 0 && WidensWindow(old, obj) {
		problems = append(problems, windowWidened)
	}
	return problems, err
}

// decode decodes the object of req (and the old one on update; old is nil
// on create). Both are nil for a kind that is not one of oria's: the
// webhook configuration does not send them; they are admitted rather than
// guessed at.
func (g *Guard) decode(req admission.Request) (old, obj client.Object, err error) {
	switch req.Kind.Kind {
	case "ScopeTemplate":
		obj, old = &oriav1alpha1.ScopeTemplate{}, &oriav1alpha1.ScopeTemplate{}
	case "ScopeInstance":
		obj, old = &oriav1alpha1.ScopeInstance{}, &oriav1alpha1.ScopeInstance{}
	case "RBACPolicy":
		obj, old = &oriav1alpha1.RBACPolicy{}, &oriav1alpha1.RBACPolicy{}
	case "AccessRequest":
		obj, old = &oriav1alpha1.AccessRequest{}, &oriav1alpha1.AccessRequest{}
	default:
		return nil, nil, nil
	}
	if err := g.decoder.DecodeRaw(req.Object, obj); err != nil {
		return nil, nil, fmt.Errorf("decoding %s: %w", req.Kind.Kind, err)
	}
	if req.Operation != admissionv1.Update {
		return nil, obj, nil
	}
	if err := g.decoder.DecodeRaw(req.OldObject, old); err != nil {
		return nil, nil, fmt.Errorf("decoding the old %s: %w", req.Kind.Kind, err)
	}
	return old, obj, nil
}

// checkRestricted checks a change by a user who may not do everything.
func (g *Guard) checkRestricted(ctx context.Context, user authenticationv1.UserInfo, kind string, c change, old, obj client.Object, dryRun bool) ([]string, error) {
	if problems, err := g.checkMetadata(ctx, user, kind, c, old, obj); err != nil || len(problems) > 0 {
		return problems, err
	}
	if !c.grants {
		return nil, nil
	}
	switch o := obj.(type) {
	case *oriav1alpha1.ScopeTemplate:
		var before *oriav1alpha1.ScopeTemplate
		if old != nil {
			before = old.(*oriav1alpha1.ScopeTemplate)
		}
		return g.checkTemplate(ctx, user, before, o)
	case *oriav1alpha1.ScopeInstance:
		planned, err := plannedTemplate(dryRun, o)
		if err != nil {
			return nil, err
		}
		return g.checkInstance(ctx, user, o, planned)
	default:
		return g.checkPolicy(ctx, user, o.(*oriav1alpha1.RBACPolicy))
	}
}

// messages formats denials for user.
func messages(user authenticationv1.UserInfo, denials []authz.Denial) []string {
	out := make([]string, len(denials))
	for i, d := range denials {
		out[i] = d.Message(user.Username)
	}
	return out
}
