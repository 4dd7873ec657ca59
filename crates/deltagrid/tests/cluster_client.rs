//! The Rust `redis` crate's cluster client against a real three-node site:
//! it discovers the slot map with CLUSTER SLOTS, routes every key to its
//! primary, and gets CROSSSLOT for a multi-key command across slots.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::cluster::ClusterClient;
use redis::Commands;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Site {
    children: Vec<Child>,
    ports: Vec<u16>,
    _dir: tempfile::TempDir,
}

impl Drop for Site {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn start_site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let cluster_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let seeds = cluster_ports
        .iter()
        .map(|p| format!("\"127.0.0.1:{p}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let mut children = Vec::new();
    for i in 0..3 {
        let cfg = dir.path().join(format!("n{i}.toml"));
        std::fs::write(
            &cfg,
            format!(
                "[node]\nid = \"n{i}\"\nlisten = \"127.0.0.1:{}\"\nadmin_listen = \"127.0.0.1:{}\"\ncluster_listen = \"127.0.0.1:{}\"\n\
                 data_dir = \"{}\"\n[site]\nid = 1\nseeds = [{seeds}]\nbackups = 0\n",
                ports[i],
                free_port(),
                cluster_ports[i],
                dir.path().join(format!("d{i}")).display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join(format!("n{i}.log"))).unwrap();
        children.push(
            Command::new(env!("CARGO_BIN_EXE_deltagrid"))
                .args(["server", "--config"])
                .arg(&cfg)
                .stdout(Stdio::from(log.try_clone().unwrap()))
                .stderr(Stdio::from(log))
                .spawn()
                .unwrap(),
        );
    }
    let site = Site {
        children,
        ports,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    for port in &site.ports {
        loop {
            let formed = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .and_then(|c| c.get_connection())
                .and_then(|mut c| redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut c))
                .is_ok_and(|info| info.contains("cluster_state:ok"));
            if formed {
                break;
            }
            if Instant::now() > deadline {
                let logs: String = (0..3)
                    .map(|i| {
                        std::fs::read_to_string(site._dir.path().join(format!("n{i}.log")))
                            .unwrap_or_default()
                    })
                    .collect();
                panic!("site did not form:\n{logs}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    site
}

#[test]
fn cluster_client_reads_and_writes_every_slot_range() {
    let site = start_site();
    let client = ClusterClient::new(vec![format!("redis://127.0.0.1:{}/", site.ports[0])]).unwrap();
    let mut con = client.get_connection().unwrap();
    for i in 0..300 {
        let _: () = con.set(format!("k{i}"), i).unwrap();
    }
    for i in 0..300 {
        let v: i64 = con.get(format!("k{i}")).unwrap();
        assert_eq!(v, i);
    }
    // Keys landed on every node.
    for port in &site.ports {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        assert!(n > 30, "node {port} holds {n} keys");
    }
    // A node answers a key it does not own with MOVED.
    let mut direct = redis::Client::open(format!("redis://127.0.0.1:{}/", site.ports[0]))
        .unwrap()
        .get_connection()
        .unwrap();
    let err = redis::cmd("MSET")
        .arg("a")
        .arg(1)
        .arg("b")
        .arg(2)
        .query::<()>(&mut direct)
        .unwrap_err();
    assert_eq!(err.code(), Some("CROSSSLOT"), "{err}");
}
