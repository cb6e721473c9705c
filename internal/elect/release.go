package elect

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// ReleasedByAnnotation names, on a released Lease, the holder that released
// it. Candidates take a Lease released by its own holder at once; a Lease
// emptied by anyone else while held they take only when the last holder's
// record expires (see loop.freeAt).
const ReleasedByAnnotation = "leasehold.io/released-by"

// maxReleaseAttempts bounds the Get+Update rounds of a release that keeps
// conflicting with concurrent writers.
const maxReleaseAttempts = 5

// releaseLease writes an empty holder, so candidates take over at once,
// but only when a fresh Get shows this instance holds the Lease, and only on
// that Get's resourceVersion. A deposed leader that still believes it leads
// (client-go's tryRelease trap) therefore never erases its successor: the
// Get shows the successor, or the Update conflicts and the next Get does.
//
// The caller must have ended the term first. It reports whether the release
// was written. leaseTransitions and the token annotation are kept, and the
// release is signed with ReleasedByAnnotation.
func (l *loop) releaseLease(ctx context.Context) (bool, error) {
	for range maxReleaseAttempts {
		reqCtx, cancel := context.WithTimeout(ctx, l.cfg.requestTimeout())
		current, err := l.leases.Get(reqCtx, l.cfg.Name, metav1.GetOptions{})
		cancel()
		if apierrors.IsNotFound(err) {
			l.observe(nil, "")
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("release: read the Lease: %w", err)
		}
		l.observe(current, current.ResourceVersion)
		if holderOf(current) != l.cfg.Identity {
			return false, nil // not ours (any more): nothing to release
		}
		released := current.DeepCopy()
		now := metav1.NewMicroTime(l.clock.Now())
		released.Spec.HolderIdentity = ptr.To("")
		released.Spec.LeaseDurationSeconds = ptr.To[int32](1) // older clients that ignore "" see it expire at once
		released.Spec.RenewTime = &now
		if released.Annotations == nil {
			released.Annotations = map[string]string{}
		}
		released.Annotations[ReleasedByAnnotation] = l.cfg.Identity

		reqCtx, cancel = context.WithTimeout(ctx, l.cfg.requestTimeout())
		written, err := l.leases.Update(reqCtx, released, metav1.UpdateOptions{})
		cancel()
		switch {
		case err == nil:
			l.ownWrite(written)
			return true, nil
		case apierrors.IsConflict(err):
			continue // written meanwhile: look again
		case apierrors.IsNotFound(err):
			l.observe(nil, "")
			return false, nil
		default:
			return false, fmt.Errorf("release: %w", err)
		}
	}
	return false, fmt.Errorf("release: still conflicting after %d attempts", maxReleaseAttempts)
}
