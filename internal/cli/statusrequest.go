package cli

import (
	oriav1alpha1 "github.com/operator-framework/oria/api/v1alpha1"
	"github.com/operator-framework/oria/internal/ownership"
	"github.com/operator-framework/oria/internal/record"
)

// RequestRecord is what `status` and `access` show of the AccessRequest
// behind an activation.
type RequestRecord struct {
	Name       string `json:"name"`
	Requester  string `json:"requester"`
	Reason     string `json:"reason,omitempty"`
	ApprovedBy string `json:"approvedBy,omitempty"`
	State      string `json:"state,omitempty"`
	// StartsAt and EndsAt bound the activation (RFC 3339, UTC).
	StartsAt string `json:"startsAt,omitempty"`
	EndsAt   string `json:"endsAt,omitempty"`
}

// requestOf returns the record of the AccessRequest that controls si, nil
// when none does (or it is not in the snapshot).
func requestOf(s *Snapshot, si *oriav1alpha1.ScopeInstance) *RequestRecord {
	name := ownership.ControllerName(si.OwnerReferences, ownership.KindAccessRequest)
	if name == "" {
		return nil
	}
	for _, r := range s.Requests {
		if r.Name == name {
			rec := &RequestRecord{Name: r.Name, Requester: r.Spec.Requester, Reason: r.Spec.Reason, ApprovedBy: r.Status.ApprovedBy, State: string(r.Status.State)}
			if r.Status.StartsAt != nil {
				rec.StartsAt = record.Now(r.Status.StartsAt.Time)
			}
			if r.Status.EndsAt != nil {
				rec.EndsAt = record.Now(r.Status.EndsAt.Time)
			}
			return rec
		}
	}
	return nil
}
