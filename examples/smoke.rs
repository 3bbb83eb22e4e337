use std::time::{Duration, Instant};
use zklock::{Client, Mutex, Options};
fn main() {
    let hosts = std::env::args().nth(1).unwrap_or("127.0.0.1:2190".into());
    let c = Client::connect(&hosts, Options::default().session_timeout(Duration::from_secs(4))).unwrap();
    println!("state {:?} nodelay {:?}", c.state(), c.socket_nodelay());
    let m = Mutex::new(&c, "/smoke/a").unwrap();
    for _ in 0..50 { let g = m.lock().unwrap(); drop(g); }
    let t = Instant::now();
    let n = 500;
    for _ in 0..n { let g = m.lock().unwrap(); drop(g); }
    println!("uncontended cycle {:?}", t.elapsed() / n);
    let c2 = Client::connect(&hosts, Options::default()).unwrap();
    let m2 = Mutex::new(&c2, "/smoke/a").unwrap();
    let g = m.lock().unwrap();
    println!("token {}", g.fencing_token());
    assert!(m2.try_lock().unwrap().is_none());
    let t = Instant::now();
    assert!(m2.try_lock_for(Duration::from_millis(300)).unwrap().is_none());
    println!("timed {:?}", t.elapsed());
    println!("participants {:?}", m.participants().unwrap());
    std::thread::scope(|s| {
        s.spawn(|| { let g2 = m2.lock().unwrap(); println!("m2 got it token {}", g2.fencing_token()); });
        std::thread::sleep(Duration::from_millis(200));
        drop(g);
    });
}
