// Package app is hostd's composition root: it wires the driver, the
// snapshot catalog, the records store, the Manager, the screen mirrors, the
// drive service and the web server together, and serves until told to
// stop. It holds no behaviour of its own beyond that.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/warmdesk/warmdesk/desktop"
	"github.com/warmdesk/warmdesk/drive"
	"github.com/warmdesk/warmdesk/e2b"
	"github.com/warmdesk/warmdesk/egress"
	"github.com/warmdesk/warmdesk/fleet"
	"github.com/warmdesk/warmdesk/hostd/config"
	"github.com/warmdesk/warmdesk/hostd/store"
	"github.com/warmdesk/warmdesk/internal/cpupressure"
	"github.com/warmdesk/warmdesk/internal/tokenfile"
	"github.com/warmdesk/warmdesk/netpolicy"
	"github.com/warmdesk/warmdesk/recording"
	"github.com/warmdesk/warmdesk/screenshot"
	"github.com/warmdesk/warmdesk/volume"
	"github.com/warmdesk/warmdesk/web"
)

// App is a running hostd: every part, wired.
type App struct {
	cfg     config.Serve
	log     *slog.Logger
	Driver  desktop.Driver
	Catalog *desktop.Catalog
	Store   store.Records
	// node is this host's part in a fleet; nil on a single host.
	node    *fleet.Node
	Manager *desktop.Manager
	Mirrors *drive.Mirrors
	// Networks are the guests' egress networks.
	Networks *egress.Set
	Volumes  *volume.Registry
	Drive    *drive.Service
	// Recordings are the recordings of desktops' screens.
	Recordings *recording.Registry
	// stopRecordings ends the registry's following of the Manager.
	stopRecordings func()
	// stopE2B ends the E2B front door's background processes.
	stopE2B func()
	Web     *web.Server
	Token   string
	// NewToken is set when the token was made at this start.
	NewToken bool
}

// Open builds every part of the daemon and recovers the desktops a
// previous hostd left running. Close releases what Open took.
func Open(ctx context.Context, cfg config.Serve, log *slog.Logger) (*App, error) {
	if err := cfg.MakeStateDirs(); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, log: log}
	var err error
	if a.Token, a.NewToken, err = tokenfile.Load(cfg.TokenFile()); err != nil {
		return nil, err
	}
	if cfg.Cluster.Name != "" {
		if a.node, err = openNode(ctx, cfg, a.Token, log); err != nil {
			return nil, err
		}
		a.Store = a.node
		if tok := a.node.Token(); tok != a.Token { // another host's, kept in the token file
			a.Token, a.NewToken = tok, false
		}
	} else if a.Store, err = store.Open(cfg.Records()); err != nil {
		return nil, err
	}
	if a.Catalog, err = desktop.NewCatalog(cfg.Snapshots()); err != nil {
		a.Close()
		return nil, err
	}
	a.Mirrors = drive.NewMirrors(context.WithoutCancel(ctx), log)
	cpu := desktop.NewCPUAdmission(cpupressure.Host(), cfg.Limits)
	if a.Driver, err = NewDriver(ctx, cfg, a.Mirrors, cpu, log); err != nil {
		a.Close()
		return nil, err
	}
	if a.Volumes, err = openVolumes(cfg, a.Store, log); err != nil {
		a.Close()
		return nil, err
	}
	metrics := web.NewMetrics(nil)
	a.Networks = egress.NewSet(egress.SetConfig{
		Policy: func(id string) (netpolicy.Policy, error) {
			d, err := a.Manager.Get(id)
			return d.Network, err
		},
		OnFlow:  func(_ string, f egress.Flow) { metrics.ObserveFlow(f.Allowed, f.Sent, f.Received) },
		OnEvent: func(id, summary string) { a.Manager.Events().Announce(id, desktop.EventNetwork, summary) },
		Logger:  log,
	})
	a.Manager = desktop.NewManager(ctx, desktop.Config{
		Driver: a.Driver, Store: a.Store, Catalog: a.Catalog, Logger: log, Limits: cfg.Limits,
		Observer:  desktop.Observers{a.Mirrors, a.Networks},
		FreeSpace: desktop.FreeSpaceOf(cfg.StateDir),
		Volumes:   a.Volumes, CPU: cpu,
	})
	metrics.Watch(a.Manager)
	if a.node != nil {
		a.node.Attach(a.Manager, cfg.Limits, imageBuilt(cfg.CacheDir))
	}
	if err := a.Manager.Recover(ctx); err != nil {
		a.Close()
		return nil, err
	}
	if a.node != nil {
		if err := a.node.Reconcile(ctx); err != nil {
			a.Close()
			return nil, err
		}
	}
	a.Manager.Volumes().CheckIdle(ctx)
	a.Drive = drive.New(ctx, drive.Config{Manager: a.Manager, Screens: a.Mirrors, Guests: a.Networks, Logger: log, Pressure: cpu.Pressure})
	if a.Recordings, a.stopRecordings, err = recording.OpenRegistry(ctx, cfg.Recordings(), a.Manager, log); err != nil {
		a.Close()
		return nil, err
	}
	screenshot.LimitEncodes(cfg.ScreenshotEncodes)
	wc := web.Config{Manager: a.Manager, Drive: a.Drive, Token: a.Token, Logger: log, Metrics: metrics, Recordings: a.Recordings,
		MaxViewersPerDesktop: cfg.MaxViewersPerDesktop, MaxViewersPerToken: cfg.MaxViewersPerToken, CPU: cpu, Limits: cfg.Limits,
		RotateToken: func() (string, error) { return tokenfile.Rotate(cfg.TokenFile()) },
		Images:      web.ImagesIn(cfg.CacheDir),
		E2B: func(daemonToken func() string, others func(context.Context) ([]desktop.Desktop, error)) http.Handler {
			e2bCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
			a.stopE2B = stop
			return e2b.New(e2bCtx, e2b.Config{Desktops: a.Manager, Events: a.Manager.Events(), Guest: a.Drive, DaemonToken: daemonToken,
				Templates: cfg.E2BTemplates, Domain: cfg.E2BDomain, GuestOnly: cfg.E2BGuestOnly, Others: others, Logger: log})
		}}
	if a.node != nil {
		wireFleet(&wc, a.node, cfg.Cluster.Host)
	}
	a.Web = web.New(wc)
	if a.node != nil {
		// A rotation on any host of the fleet holds on every host.
		a.node.FollowToken(a.Web.SetToken)
	}
	return a, nil
}

// Close stops background work. Desktops keep running for the next hostd.
func (a *App) Close() {
	if a.stopE2B != nil {
		a.stopE2B()
	}
	if a.stopRecordings != nil {
		a.stopRecordings()
	}
	if a.Manager != nil {
		a.Manager.Close()
	}
	if a.Networks != nil {
		a.Networks.Close()
	}
	if c, ok := a.Driver.(Closer); ok {
		c.Close()
	}
	if a.Store != nil {
		a.Store.Close()
	}
}

// Serve listens and serves until ctx ends, then shuts down gracefully:
// it stops accepting, lets in-flight requests finish within the grace
// period, and leaves desktops running (or hibernates them, if configured).
func (a *App) Serve(ctx context.Context, ready func(addr string)) error {
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", a.cfg.Listen, err)
	}
	addr := ln.Addr().String()
	// Written whole: a client polling for the file must never read it empty.
	if err := tokenfile.WriteWhole(a.cfg.AddressFile(), []byte(addr+"\n")); err != nil {
		ln.Close()
		return fmt.Errorf("write address: %w", err)
	}
	defer os.Remove(a.cfg.AddressFile())
	if a.node != nil {
		if err := a.node.Join(ctx, addr, a.Web.PeerHandler()); err != nil {
			ln.Close()
			return err
		}
	}
	// Headers are bounded in time and size for everyone; a request's body
	// and answer are not bounded server-wide (file transfers, exec streams
	// and WebSockets last as long as they need), but only after the token
	// in the headers has been checked. Idle keep-alive connections close.
	srv := &http.Server{
		Handler:           a.Web.Handler(),
		ReadHeaderTimeout: a.cfg.HeaderTimeout,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       a.cfg.IdleTimeout,
	}
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	go a.Manager.Run(runCtx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if ready != nil {
		ready(addr)
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	a.log.Info("stopping: finishing in-flight requests", "grace", a.cfg.ShutdownGrace)
	shutCtx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		a.log.Warn("in-flight requests cut short", "err", err)
	}
	if a.cfg.HibernateOnStop {
		a.hibernateAll(shutCtx)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (a *App) hibernateAll(ctx context.Context) {
	for _, d := range a.Manager.List() {
		if !d.State.Live() {
			continue
		}
		if _, err := a.Manager.Hibernate(ctx, d.ID); err != nil {
			a.log.Warn("hibernate on stop", "desktop", d.ID, "err", err)
		} else {
			a.log.Info("hibernated", "desktop", d.ID)
		}
	}
}
