package podlabel

import (
	"context"
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// FieldManager names the Labeler's writes in the Pods' managedFields.
const FieldManager = "leasehold-podlabel"

// labelPatch is a JSON merge patch that sets the given labels and leaves
// the others alone. With a resourceVersion it is conditional: the apiserver
// answers 409 if the Pod changed since that version, and does not retry it.
func labelPatch(set labels.Set, resourceVersion string) []byte {
	type meta struct {
		ResourceVersion string     `json:"resourceVersion,omitempty"`
		Labels          labels.Set `json:"labels"`
	}
	body, err := json.Marshal(struct {
		Metadata meta `json:"metadata"`
	}{meta{resourceVersion, set}})
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	return body
}

// patchOwn sets the leader label to value on this sidecar's own Pod, and
// the election label with it, unconditionally: this instance alone decides
// its Pod's values. The caller bounds ctx.
func (l *Labeler) patchOwn(ctx context.Context, value bool) error {
	set := labels.Set{l.key: strconv.FormatBool(value), l.electionKey: l.election}
	_, err := l.pods.Patch(ctx, l.cfg.PodName, types.MergePatchType, labelPatch(set, ""), metav1.PatchOptions{FieldManager: FieldManager})
	return err
}

// listLabeled returns the Pods of the namespace that carry <key>=true (the
// Lease's key, in a group) and this election's label, read consistently (resourceVersion unset: from
// etcd, or a cache proven fresh). Pods of other elections, and Pods
// labelled by a leasehold that wrote no election label, are not among them.
func (l *Labeler) listLabeled(ctx context.Context) ([]corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.requestTimeout())
	defer cancel()
	list, err := l.pods.List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{l.key: "true", l.electionKey: l.election}).String(),
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// clearStale sets another Pod's leader label to false, provided the Pod is
// still at resourceVersion, the version the list saw it carry true with
// this election's label (which stays as it is).
func (l *Labeler) clearStale(ctx context.Context, name, resourceVersion string) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.requestTimeout())
	defer cancel()
	_, err := l.pods.Patch(ctx, name, types.MergePatchType, labelPatch(labels.Set{l.key: "false"}, resourceVersion), metav1.PatchOptions{FieldManager: FieldManager})
	return err
}
