// Command image builds leasehold's container image with no container
// engine (make image), with go-containerregistry: a multi-platform OCI
// image index of one image per platform, each the static binary alone at
// /leasehold in one layer, run as 65532:65532 with ENTRYPOINT ["/leasehold"]
// and the OCI labels, on an empty base (FROM scratch). The Dockerfile
// describes the same image for docker build; test/image compares the two.
//
// It is reproducible: every time in the image (the layer's file, the
// config's created, the history) is -created, the commit's time, and
// nothing else varies, so the same binaries and flags give the same
// digests.
//
// Usage:
//
//	image -out DIR -repository REPO -tag TAG -version V -revision SHA -created UNIX \
//	    linux/amd64=PATH linux/arm64=PATH
//
// It writes DIR/oci (an OCI image layout whose index.json names the image
// REPO:TAG), DIR/leasehold-TAG.oci.tar (that layout as an archive, for
// `ctr images import` and `docker load`), DIR/leasehold-TAG-OS-ARCH.docker.tar
// (one image per platform in `docker save` form, for any docker load) and
// DIR/digests.txt (the index's digest, then each platform's manifest).
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed parts, which the Dockerfile's final stage states too.
const (
	binaryPath = "/leasehold"
	user       = "65532:65532"
	source     = "https://github.com/leasehold/leasehold"
)

// staticLabels are the OCI labels that do not depend on the build.
var staticLabels = map[string]string{
	"org.opencontainers.image.title":         "leasehold",
	"org.opencontainers.image.description":   "A leader-election sidecar for Kubernetes: a Lease held for the app, fencing tokens and leadership on localhost HTTP",
	"org.opencontainers.image.source":        source,
	"org.opencontainers.image.url":           source,
	"org.opencontainers.image.documentation": source + "#readme",
	"org.opencontainers.image.licenses":      "Apache-2.0",
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// build is what one run is asked to build.
type build struct {
	out, repository, tag, version, revision string
	created                                 time.Time
	binaries                                []platformBinary // in the order given
}

type platformBinary struct {
	platform v1.Platform
	path     string
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var b build
	var created string
	fs.StringVar(&b.out, "out", "", "output directory (what an earlier run wrote there is replaced)")
	fs.StringVar(&b.repository, "repository", "ghcr.io/leasehold/leasehold", "the image's repository, for its name")
	fs.StringVar(&b.tag, "tag", "", "the image's tag (the version without its v)")
	fs.StringVar(&b.version, "version", "", "org.opencontainers.image.version (git describe)")
	fs.StringVar(&b.revision, "revision", "", "org.opencontainers.image.revision (the commit)")
	fs.StringVar(&created, "created", "", "the commit's time, in seconds since the epoch: the image's every timestamp")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for flagName, v := range map[string]string{"-out": b.out, "-tag": b.tag, "-version": b.version, "-revision": b.revision, "-created": created} {
		if v == "" {
			return fmt.Errorf("%s is required", flagName)
		}
	}
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		return fmt.Errorf("-created %q: want seconds since the epoch: %w", created, err)
	}
	b.created = time.Unix(secs, 0).UTC()
	if fs.NArg() == 0 {
		return errors.New("want at least one OS/ARCH=BINARY")
	}
	for _, a := range fs.Args() {
		p, path, ok := strings.Cut(a, "=")
		osName, arch, ok2 := strings.Cut(p, "/")
		if !ok || !ok2 || osName == "" || arch == "" || path == "" {
			return fmt.Errorf("%q: want OS/ARCH=BINARY", a)
		}
		b.binaries = append(b.binaries, platformBinary{v1.Platform{OS: osName, Architecture: arch}, path})
	}
	return b.write()
}

// labels are the image's OCI labels.
func (b build) labels() map[string]string {
	l := map[string]string{
		"org.opencontainers.image.version":  b.version,
		"org.opencontainers.image.revision": b.revision,
		"org.opencontainers.image.created":  b.created.Format(time.RFC3339),
	}
	for k, v := range staticLabels {
		l[k] = v
	}
	return l
}

// image is one platform's image: the binary alone, as the entrypoint.
func (b build) image(pb platformBinary) (v1.Image, error) {
	data, err := os.ReadFile(pb.path)
	if err != nil {
		return nil, err
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg, Name: strings.TrimPrefix(binaryPath, "/"), Mode: 0o755, Size: int64(len(data)),
		ModTime: b.created, Format: tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	tarBytes := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: b.created},
			CreatedBy: "COPY " + binaryPath + " (leasehold's hack/image)",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = pb.platform.OS, pb.platform.Architecture
	cf.Created = v1.Time{Time: b.created}
	cf.Config = v1.Config{
		User:       user,
		Entrypoint: []string{binaryPath},
		Labels:     b.labels(),
	}
	return mutate.ConfigFile(img, cf)
}

// write builds the index and writes every output.
func (b build) write() error {
	ref, err := name.NewTag(b.repository + ":" + b.tag)
	if err != nil {
		return err
	}
	// What an earlier run wrote goes first (the layout must start empty);
	// nothing else in -out is touched.
	old, err := filepath.Glob(filepath.Join(b.out, "leasehold-*.tar"))
	if err != nil {
		return err
	}
	for _, path := range append(old, filepath.Join(b.out, "oci"), filepath.Join(b.out, "digests.txt")) {
		if err := os.RemoveAll(path); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(b.out, 0o755); err != nil {
		return err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var images []v1.Image
	for _, pb := range b.binaries {
		img, err := b.image(pb)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", pb.platform.OS, pb.platform.Architecture, err)
		}
		platform := pb.platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
		images = append(images, img)
	}

	dir := filepath.Join(b.out, "oci")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          ref.String(),
		"org.opencontainers.image.ref.name": b.tag,
	})); err != nil {
		return err
	}
	if err := tarDir(dir, filepath.Join(b.out, "leasehold-"+b.tag+".oci.tar"), b.created); err != nil {
		return err
	}
	for i, img := range images {
		pb := b.binaries[i]
		path := filepath.Join(b.out, fmt.Sprintf("leasehold-%s-%s-%s.docker.tar", b.tag, pb.platform.OS, pb.platform.Architecture))
		if err := tarball.WriteToFile(path, ref, img); err != nil {
			return err
		}
	}

	d, err := idx.Digest()
	if err != nil {
		return err
	}
	var digests strings.Builder
	fmt.Fprintf(&digests, "%s %s index\n", d, ref)
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, desc := range m.Manifests {
		fmt.Fprintf(&digests, "%s %s %s/%s\n", desc.Digest, ref, desc.Platform.OS, desc.Platform.Architecture)
	}
	fmt.Print(digests.String())
	return os.WriteFile(filepath.Join(b.out, "digests.txt"), []byte(digests.String()), 0o644)
}

// tarDir writes the files under dir into an archive at out, sorted, owned
// by 0:0, with mtime t: the same files give the same archive.
func tarDir(dir, out string, t time.Time) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: t, Format: tar.FormatPAX}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
