package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
)

// StatusWatch is what `kubectl oria status --watch` does after its table,
// as `kubectl get --watch` does: it watches RBACPolicies and prints a line
// (the table's row of the policy, without a header) for each change one
// shows, until it is stopped (Ctrl-C, SIGTERM, or its context).
type StatusWatch struct {
	Out  io.Writer
	Wide bool
	// Extensions limits the lines to the policies of these extensions
	// (all when empty).
	Extensions []string
	// Modes are the MODE cells of the extensions the table showed.
	Modes map[string]string
	// Now is the clock windows are judged by (time.Now when nil).
	Now func() time.Time

	// shown is each policy's line as last printed (its key, lineKey):
	// a change no column shows (a status write of the same state)
	// prints nothing.
	shown map[string]string
}

// Seen records policies as the table showed them: a later event that
// changes nothing visible prints no line.
func (w *StatusWatch) Seen(policies []oriav1alpha1.RBACPolicy) {
	for i := range policies {
		w.line(&policies[i], false, false)
	}
}

// Run prints a line for each change of an RBACPolicy after resource
// version rv (a list's), until ctx ends or Ctrl-C: then it returns nil.
// When the API server ends the watch it watches again from the last
// version seen; when that version is too old, it lists again and prints
// what changed meanwhile.
func (w *StatusWatch) Run(ctx context.Context, c client.WithWatch, rv string) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	for ctx.Err() == nil {
		if rv == "" {
			var err error
			if rv, err = w.relist(ctx, c); err != nil {
				return quiet(ctx, err)
			}
		}
		wi, err := c.Watch(ctx, &oriav1alpha1.RBACPolicyList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = ""
				continue
			}
			return quiet(ctx, fmt.Errorf("watching RBACPolicies: %w", err))
		}
		rv, err = w.follow(ctx, wi, rv)
		wi.Stop()
		if err != nil {
			return quiet(ctx, err)
		}
	}
	return nil
}

// quiet is err, or nil once ctx has ended (the user stopped the watch).
func quiet(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// follow prints the events of wi until it ends, and returns the resource
// version to watch from next ("" to list again).
func (w *StatusWatch) follow(ctx context.Context, wi watch.Interface, rv string) (string, error) {
	for {
		select {
		case <-ctx.Done():
			return rv, nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return rv, nil
			}
			if ev.Type == watch.Error {
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					return "", nil
				}
				return rv, fmt.Errorf("watching RBACPolicies: %w", err)
			}
			p, ok := ev.Object.(*oriav1alpha1.RBACPolicy)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			switch ev.Type {
			case watch.Added, watch.Modified:
				w.line(p, false, true)
			case watch.Deleted:
				w.line(p, true, true)
			}
		}
	}
}

// relist lists the policies, prints a line for each that changed since
// last shown and for each that is gone, and returns the list's version.
func (w *StatusWatch) relist(ctx context.Context, c client.Reader) (string, error) {
	list := &oriav1alpha1.RBACPolicyList{}
	if err := c.List(ctx, list); err != nil {
		return "", fmt.Errorf("listing RBACPolicies: %w", err)
	}
	names := map[string]bool{}
	for i := range list.Items {
		names[list.Items[i].Name] = true
		w.line(&list.Items[i], false, true)
	}
	var gone []string
	for name := range w.shown {
		if !names[name] {
			gone = append(gone, name)
		}
	}
	slices.Sort(gone)
	for _, name := range gone {
		p := &oriav1alpha1.RBACPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		p.Spec.ExtensionName, _, _ = strings.Cut(w.shown[name], "\x00")
		w.line(p, true, true)
	}
	return list.ResourceVersion, nil
}

// line prints the policy's row when it differs from the one last shown
// (print), or only records it.
func (w *StatusWatch) line(p *oriav1alpha1.RBACPolicy, deleted, print bool) {
	if len(w.Extensions) > 0 && !slices.Contains(w.Extensions, p.Spec.ExtensionName) {
		return
	}
	if w.shown == nil {
		w.shown = map[string]string{}
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	g := policyGrant(p, now())
	r := grantRow(p.Spec.ExtensionName, w.Modes[p.Spec.ExtensionName], g)
	if deleted {
		r.Cells[4], r.Cells[5] = g.Access, "Deleted"
	}
	key := lineKey(r, g)
	if last, ok := w.shown[p.Name]; (ok && last == key) || (deleted && !ok) {
		return
	}
	if deleted {
		delete(w.shown, p.Name)
	} else {
		w.shown[p.Name] = key
	}
	if !print {
		return
	}
	t := statusColumns()
	t.Rows = append(t.Rows, r)
	_ = printers.NewTablePrinter(printers.PrintOptions{Wide: w.Wide, NoHeaders: true}).PrintObj(t, w.Out)
}

// lineKey is what a line shows, less the time left in its window (which
// changes by itself): the extension first, then the cells.
func lineKey(r metav1.TableRow, g Grant) string {
	parts := []string{fmt.Sprint(r.Cells[0])}
	for i, c := range r.Cells {
		if i != 6 {
			parts = append(parts, fmt.Sprint(c))
		}
	}
	if g.Window != nil {
		parts = append(parts, g.Window.State, fmt.Sprint(g.Window.NotBefore), fmt.Sprint(g.Window.ExpiresAt))
	}
	return strings.Join(parts, "\x00")
}
