//! libmeos, loaded at run time, and the few of its functions the engine uses.

use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
use mfstream_ops::{ArgError, CATALOGUE, Kind, Meos as Shape, Op};

use crate::MEOS_LIB_VAR;

/// A MEOS `Temporal`, opaque.
pub type Temporal = c_void;
type Unary = unsafe extern "C" fn(*const Temporal) -> *mut Temporal;
type WithFloat = unsafe extern "C" fn(*const Temporal, f64) -> *mut Temporal;
type WithBool = unsafe extern "C" fn(*const Temporal, bool) -> *mut Temporal;
type Scalar = unsafe extern "C" fn(f64) -> f64;

unsafe extern "C" {
    /// MEOS allocates with the C library's malloc.
    fn free(ptr: *mut c_void);
}

/// An operation of the catalogue and its argument (0 when it takes none),
/// validated for MEOS.
#[derive(Debug, Clone, Copy)]
pub struct MeosOp {
    op: Op,
    arg: f64,
}

impl MeosOp {
    /// Validates an operation of the catalogue for MEOS: its name as the
    /// host writes it, and its argument ([`Op::check_arg`]).
    pub fn new(name: &str, arg: Option<f64>) -> Result<MeosOp, String> {
        let op =
            Op::find(name, Kind::Number).ok_or_else(|| format!("unknown operation {name:?}"))?;
        if op.entry().meos.is_none() {
            return Err(format!("operation {name} is not served by MEOS"));
        }
        let arg = op.check_arg(arg).map_err(|e| match e {
            ArgError::Needless => format!("operation {name} takes no argument"),
            ArgError::Missing => format!("operation {name} needs a scalar argument"),
            ArgError::NotFinite => format!("operation {name} needs a finite argument"),
            ArgError::Zero => format!("operation {name} by zero is undefined"),
        })?;
        Ok(MeosOp { op, arg })
    }
}

/// A MEOS function, of the shape the catalogue says ([`Shape`]).
#[derive(Clone, Copy)]
enum Function {
    Unary(Unary),
    Degrees(WithBool),
    Binary(WithFloat),
    Scalar(Scalar),
    Tan { sin: Scalar, cos: Scalar },
}

/// A MEOS `GSERIALIZED` (a geometry or geography), opaque.
pub type Gs = c_void;

/// The MEOS functions on `tgeogpoint`/`tgeompoint` the position engine
/// calls, with their MEOS 1.3 types (`TimestampTz` is µs since 2000-01-01).
#[allow(missing_docs)]
pub struct GeoFns {
    pub geo_from_geojson: unsafe extern "C" fn(*const c_char) -> *mut Gs,
    pub geo_set_srid: unsafe extern "C" fn(*const Gs, i32) -> *mut Gs,
    pub geom_to_geog: unsafe extern "C" fn(*const Gs) -> *mut Gs,
    pub geogpoint_make2d: unsafe extern "C" fn(i32, f64, f64) -> *mut Gs,
    pub geompoint_make2d: unsafe extern "C" fn(i32, f64, f64) -> *mut Gs,
    pub geom_covers: unsafe extern "C" fn(*const Gs, *const Gs) -> bool,
    pub tpointinst_make: unsafe extern "C" fn(*const Gs, i64) -> *mut Temporal,
    pub tsequence_make: unsafe extern "C" fn(
        *const *const Temporal,
        c_int,
        bool,
        bool,
        c_int,
        bool,
    ) -> *mut Temporal,
    pub tpoint_speed: unsafe extern "C" fn(*const Temporal) -> *mut Temporal,
    pub tpoint_azimuth: unsafe extern "C" fn(*const Temporal) -> *mut Temporal,
    pub tpoint_length: unsafe extern "C" fn(*const Temporal) -> f64,
    pub tpoint_get_x: unsafe extern "C" fn(*const Temporal) -> *mut Temporal,
    pub tpoint_get_y: unsafe extern "C" fn(*const Temporal) -> *mut Temporal,
    pub nad_tgeo_geo: unsafe extern "C" fn(*const Temporal, *const Gs) -> f64,
    pub tintersects_tgeo_geo:
        unsafe extern "C" fn(*const Temporal, *const Gs, bool, bool) -> *mut Temporal,
    pub temporal_num_instants: unsafe extern "C" fn(*const Temporal) -> c_int,
    pub temporal_instant_n: unsafe extern "C" fn(*const Temporal, c_int) -> *mut Temporal,
    pub temporal_start_timestamptz: unsafe extern "C" fn(*const Temporal) -> i64,
    pub tbool_start_value: unsafe extern "C" fn(*const Temporal) -> bool,
    pub tfloat_start_value: unsafe extern "C" fn(*const Temporal) -> f64,
    pub tfloat_value_at_timestamptz:
        unsafe extern "C" fn(*const Temporal, i64, bool, *mut f64) -> bool,
    pub tpoint_trajectory: unsafe extern "C" fn(*const Temporal, bool) -> *mut Gs,
    pub geom_boundary: unsafe extern "C" fn(*const Gs) -> *mut Gs,
    pub geom_intersection2d: unsafe extern "C" fn(*const Gs, *const Gs) -> *mut Gs,
    pub geo_num_geos: unsafe extern "C" fn(*const Gs) -> c_int,
    pub geo_geo_n: unsafe extern "C" fn(*const Gs, c_int) -> *mut Gs,
    pub geo_as_geojson: unsafe extern "C" fn(*const Gs, c_int, c_int, *const c_char) -> *mut c_char,
}

/// libmeos, initialised, with the functions the engine calls.
pub struct Meos {
    /// The functions on positions.
    pub geo: GeoFns,
    tfloatinst_make: unsafe extern "C" fn(f64, i64) -> *mut Temporal,
    tfloat_start_value: unsafe extern "C" fn(*const Temporal) -> f64,
    /// Each operation's function, by its index in the catalogue; `None`
    /// for one MEOS does not serve here (not on numbers, or no function).
    functions: Vec<Option<Function>>,
    /// Serialises calls: MEOS keeps global state.
    lock: Mutex<()>,
}

thread_local! {
    /// The last error MEOS reported on this thread.
    static LAST_ERROR: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// MEOS's error handler: records the error instead of exiting the process.
extern "C" fn on_error(_level: c_int, code: c_int, message: *const c_char) {
    let text = if message.is_null() {
        format!("error {code}")
    } else {
        // SAFETY: MEOS passes a NUL-terminated message valid for the call.
        unsafe { CStr::from_ptr(message) }
            .to_string_lossy()
            .into_owned()
    };
    LAST_ERROR.with(|e| *e.borrow_mut() = Some(text));
}

impl Meos {
    /// libmeos, loaded and initialised once per process.
    pub fn get() -> Result<&'static Meos, String> {
        static MEOS: OnceLock<Result<Meos, String>> = OnceLock::new();
        MEOS.get_or_init(Meos::load).as_ref().map_err(Clone::clone)
    }

    /// Holds MEOS for a batch.
    pub fn lock(&self) -> MutexGuard<'_, ()> {
        self.lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn load() -> Result<Meos, String> {
        let configured = std::env::var_os(MEOS_LIB_VAR)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                format!(
                    "{MEOS_LIB_VAR} is not set: point it at libmeos (the file or its folder; \
                 `pip install pymeos-cffi==1.3.0` ships one in site-packages/pymeos_cffi.libs)"
                )
            })?;
        let file = find_libmeos(Path::new(&configured))?;
        let library = open_with_neighbours(&file)?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol has this type in MEOS 1.3's meos.h.
                *unsafe { library.get(concat!($name, "\0").as_bytes()) }.map_err(|e| {
                    format!(
                        "{} has no {} (MEOS 1.3 is needed): {e}",
                        file.display(),
                        $name
                    )
                })?
            };
        }
        let initialize: unsafe extern "C" fn() = sym!("meos_initialize");
        let timezone: unsafe extern "C" fn(*const c_char) = sym!("meos_initialize_timezone");
        let handler: unsafe extern "C" fn(extern "C" fn(c_int, c_int, *const c_char)) =
            sym!("meos_initialize_error_handler");
        // The catalogue names each operation's function and its shape.
        let function = |symbol: &str| {
            let name = format!("{symbol}\0");
            // SAFETY: every function the catalogue names for MEOS has the
            // type of its shape (`mfstream_ops::Meos`) in MEOS 1.3's meos.h;
            // the caller picks the shape from the same entry.
            unsafe { library.get::<unsafe extern "C" fn()>(name.as_bytes()) }
                .map(|f| *f as *const c_void)
                .map_err(|e| {
                    format!(
                        "{} has no {symbol} (MEOS 1.3 is needed): {e}",
                        file.display()
                    )
                })
        };
        let mut functions = Vec::with_capacity(CATALOGUE.len());
        for entry in CATALOGUE {
            let Some(shape) = entry.meos.filter(|_| entry.kinds.contains(&Kind::Number)) else {
                functions.push(None);
                continue;
            };
            let f = function(shape.symbol())?;
            // SAFETY: `f` is the function of this shape (above).
            functions.push(Some(unsafe {
                match shape {
                    Shape::Unary(_) => {
                        Function::Unary(std::mem::transmute::<*const c_void, Unary>(f))
                    }
                    Shape::Degrees(_) => {
                        Function::Degrees(std::mem::transmute::<*const c_void, WithBool>(f))
                    }
                    Shape::Binary(_) => {
                        Function::Binary(std::mem::transmute::<*const c_void, WithFloat>(f))
                    }
                    Shape::Scalar(_) => {
                        Function::Scalar(std::mem::transmute::<*const c_void, Scalar>(f))
                    }
                    Shape::Tan => Function::Tan {
                        sin: std::mem::transmute::<*const c_void, Scalar>(f),
                        cos: std::mem::transmute::<*const c_void, Scalar>(function("pg_dcos")?),
                    },
                }
            }));
        }
        let geo = GeoFns {
            geo_from_geojson: sym!("geo_from_geojson"),
            geo_set_srid: sym!("geo_set_srid"),
            geom_to_geog: sym!("geom_to_geog"),
            geogpoint_make2d: sym!("geogpoint_make2d"),
            geompoint_make2d: sym!("geompoint_make2d"),
            geom_covers: sym!("geom_covers"),
            tpointinst_make: sym!("tpointinst_make"),
            tsequence_make: sym!("tsequence_make"),
            tpoint_speed: sym!("tpoint_speed"),
            tpoint_azimuth: sym!("tpoint_azimuth"),
            tpoint_length: sym!("tpoint_length"),
            tpoint_get_x: sym!("tpoint_get_x"),
            tpoint_get_y: sym!("tpoint_get_y"),
            nad_tgeo_geo: sym!("nad_tgeo_geo"),
            tintersects_tgeo_geo: sym!("tintersects_tgeo_geo"),
            temporal_num_instants: sym!("temporal_num_instants"),
            temporal_instant_n: sym!("temporal_instant_n"),
            temporal_start_timestamptz: sym!("temporal_start_timestamptz"),
            tbool_start_value: sym!("tbool_start_value"),
            tfloat_start_value: sym!("tfloat_start_value"),
            tfloat_value_at_timestamptz: sym!("tfloat_value_at_timestamptz"),
            tpoint_trajectory: sym!("tpoint_trajectory"),
            geom_boundary: sym!("geom_boundary"),
            geom_intersection2d: sym!("geom_intersection2d"),
            geo_num_geos: sym!("geo_num_geos"),
            geo_geo_n: sym!("geo_geo_n"),
            geo_as_geojson: sym!("geo_as_geojson"),
        };
        let meos = Meos {
            geo,
            tfloatinst_make: sym!("tfloatinst_make"),
            tfloat_start_value: sym!("tfloat_start_value"),
            functions,
            lock: Mutex::new(()),
        };
        // PROJ (which MEOS uses for reference systems) looks for its
        // database where pymeos-cffi's wheel puts it, as pymeos points it
        // there; without it MEOS says `Cannot find proj.db` on stderr.
        if let Some(data) = proj_data(&file) {
            // SAFETY: PROJ's C API: a null context is the default one, and
            // the paths are C strings it copies.
            let set: Result<
                libloading::os::unix::Symbol<
                    unsafe extern "C" fn(*mut c_void, c_int, *const *const c_char),
                >,
                _,
            > = unsafe { library.get(b"proj_context_set_search_paths\0") };
            if let (Ok(set), Ok(path)) = (
                set,
                std::ffi::CString::new(data.as_os_str().as_encoded_bytes()),
            ) {
                let paths = [path.as_ptr()];
                // SAFETY: as above.
                unsafe { set(std::ptr::null_mut(), 1, paths.as_ptr()) };
            }
        }
        // SAFETY: MEOS's initialisation, once per process (we are inside a
        // OnceLock). `meos_initialize` installs MEOS's own handler, which
        // exits the process; ours replaces it before any other call.
        unsafe {
            initialize();
            handler(on_error);
            timezone(c"UTC".as_ptr());
        }
        // Geographies need MEOS's table of reference systems, which a wheel
        // ships beside its libraries (pymeos-cffi: pymeos_cffi/meos_data).
        if let Some(csv) = spatial_ref_sys(&file) {
            // SAFETY: the symbol has this type in MEOS 1.3's meos.h.
            let set: Result<libloading::os::unix::Symbol<unsafe extern "C" fn(*const c_char)>, _> =
                unsafe { library.get(b"meos_set_spatial_ref_sys_csv\0") };
            if let (Ok(set), Ok(path)) = (
                set,
                std::ffi::CString::new(csv.as_os_str().as_encoded_bytes()),
            ) {
                // SAFETY: MEOS is initialised; the path is a C string it copies.
                unsafe { set(path.as_ptr()) };
            }
        }
        // The functions point into the library: it stays loaded for good.
        std::mem::forget(library);
        Ok(meos)
    }

    /// Applies `op` to `x` through MEOS. The caller holds [`Meos::lock`].
    pub fn apply(&self, op: MeosOp, x: f64) -> Result<f64, String> {
        LAST_ERROR.with(|e| e.borrow_mut().take());
        // SAFETY (each call below): MEOS is initialised, and each function
        // is called with the arguments of its shape.
        let Some(function) = self.functions[op.op as usize] else {
            return Err(format!("{} is not served by MEOS", op.op));
        };
        match function {
            Function::Scalar(f) => self.scalar(x, f, None),
            Function::Tan { sin, cos } => self.scalar(x, sin, Some(cos)),
            Function::Unary(f) => self.lifted(x, |i| unsafe { f(i) }),
            Function::Degrees(f) => self.lifted(x, |i| unsafe { f(i, false) }),
            Function::Binary(f) => self.lifted(x, |i| unsafe { f(i, op.arg) }),
        }
    }

    /// `f` of a `tfloat` instant of `x`, read back as a number.
    fn lifted(
        &self,
        x: f64,
        f: impl FnOnce(*const Temporal) -> *mut Temporal,
    ) -> Result<f64, String> {
        // SAFETY: MEOS is initialised; every Temporal made here is freed
        // here, after its last use.
        unsafe {
            let instant = (self.tfloatinst_make)(x, 0);
            if instant.is_null() {
                return Err(last_error("cannot make a tfloat instant"));
            }
            let result = f(instant);
            free(instant);
            if result.is_null() || LAST_ERROR.with(|e| e.borrow().is_some()) {
                if !result.is_null() {
                    free(result);
                }
                return Err(last_error("no result"));
            }
            let y = (self.tfloat_start_value)(result);
            free(result);
            if y.is_finite() {
                Ok(y)
            } else {
                Err(format!("has no finite result for {x}"))
            }
        }
    }

    /// `sin` and `cos` through MEOS's float8 sine and cosine (its
    /// adaptation of PostgreSQL's `dsin` and `dcos`), on the value itself: a
    /// `tfloat` instant would carry it unchanged; `tan` is `f` (the sine)
    /// over `divisor` (the cosine). An infinite input is an error through
    /// MEOS's handler (which then returns `DBL_MAX`). The caller holds
    /// [`Meos::lock`] and has cleared the last error.
    fn scalar(&self, x: f64, f: Scalar, divisor: Option<Scalar>) -> Result<f64, String> {
        let failed = || LAST_ERROR.with(|e| e.borrow().is_some());
        // SAFETY: MEOS is initialised; these take and return a double.
        let y = unsafe {
            let y = f(x);
            match divisor {
                Some(cos) if !failed() => y / cos(x),
                _ => y,
            }
        };
        if failed() {
            return Err(last_error("no result"));
        }
        if y.is_finite() {
            Ok(y)
        } else {
            Err(format!("has no finite result for {x}"))
        }
    }
}

/// Clears MEOS's last error on this thread.
pub fn clear_error() {
    LAST_ERROR.with(|e| e.borrow_mut().take());
}

/// MEOS's last error on this thread, if any, taken.
pub fn take_error() -> Option<String> {
    LAST_ERROR.with(|e| e.borrow_mut().take())
}

/// Frees what MEOS allocated (with the C library's malloc).
///
/// # Safety
///
/// `ptr` is null or MEOS's, not freed yet, and not used after.
pub unsafe fn release(ptr: *mut c_void) {
    if !ptr.is_null() {
        // SAFETY: the caller's guarantee.
        unsafe { free(ptr) }
    }
}

/// MEOS's last error on this thread, or `otherwise`.
fn last_error(otherwise: &str) -> String {
    LAST_ERROR
        .with(|e| e.borrow_mut().take())
        .unwrap_or_else(|| otherwise.to_owned())
}

/// PROJ's data folder for the libmeos at `file`, unless `PROJ_DATA` or
/// `PROJ_LIB` names one: where pymeos-cffi's wheel puts it.
fn proj_data(file: &Path) -> Option<PathBuf> {
    if std::env::var_os("PROJ_DATA").is_some() || std::env::var_os("PROJ_LIB").is_some() {
        return None;
    }
    let data = file.parent()?.join("../pymeos_cffi/proj_data");
    data.join("proj.db").is_file().then_some(data)
}

/// MEOS's table of reference systems for the libmeos at `file`: next to
/// it, or where pymeos-cffi's wheel puts it (`../pymeos_cffi/meos_data/`).
fn spatial_ref_sys(file: &Path) -> Option<PathBuf> {
    let folder = file.parent()?;
    [
        folder.join("spatial_ref_sys.csv"),
        folder.join("../pymeos_cffi/meos_data/spatial_ref_sys.csv"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// The libmeos file: `path` itself, or the `libmeos*.so*` in folder `path`.
fn find_libmeos(path: &Path) -> Result<PathBuf, String> {
    if path.is_file() {
        return Ok(path.to_owned());
    }
    let entries = std::fs::read_dir(path)
        .map_err(|e| format!("{MEOS_LIB_VAR} = {}: cannot read it: {e}", path.display()))?;
    entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libmeos") && n.contains(".so"))
        })
        .ok_or_else(|| format!("{MEOS_LIB_VAR} = {}: no libmeos*.so in it", path.display()))
}

/// Opens `file`; when its dependencies are not found, loads the libraries
/// next to it first (wheels such as pymeos-cffi's carry them there, without
/// an RPATH), then tries again.
fn open_with_neighbours(file: &Path) -> Result<Library, String> {
    let flags = RTLD_NOW | RTLD_GLOBAL;
    // SAFETY: loading libmeos runs its initialisers, as any use of it must.
    let first = match unsafe { Library::open(Some(file), flags) } {
        Ok(library) => return Ok(library),
        Err(e) => e,
    };
    let folder = file.parent().unwrap_or(Path::new("."));
    let mut pending: Vec<PathBuf> = std::fs::read_dir(folder)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|p| p != file && p.to_string_lossy().contains(".so"))
                .collect()
        })
        .unwrap_or_default();
    // Load what loads, until a pass loads nothing more: the order of
    // dependencies sorts itself out.
    loop {
        let before = pending.len();
        pending.retain(|dep| {
            // SAFETY: a library shipped next to libmeos, for it.
            match unsafe { Library::open(Some(dep), flags) } {
                Ok(library) => {
                    std::mem::forget(library);
                    false
                }
                Err(_) => true,
            }
        });
        if pending.len() == before {
            break;
        }
    }
    // SAFETY: as above.
    unsafe { Library::open(Some(file), flags) }.map_err(|e| {
        format!(
            "cannot load {}: {e} (first attempt: {first})",
            file.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libmeos, or a failure naming the variable: the tests that need it
    /// are ignored unless run with `--include-ignored` (as `.ci/run` does).
    fn meos() -> &'static Meos {
        assert!(
            std::env::var_os(MEOS_LIB_VAR).is_some_and(|v| !v.is_empty()),
            "this test needs libmeos: set {MEOS_LIB_VAR} to the MFAPI_MEOS_LIBPATH of `jobs/meos/setup.sh`"
        );
        Meos::get().unwrap()
    }

    #[test]
    #[ignore = "needs libmeos in MFSTREAM_MEOS_LIB (see jobs/meos/setup.sh)"]
    fn meos_sine_and_cosine_of_an_infinity_fail_with_meos_message() {
        let meos = meos();
        let _serial = meos.lock();
        for name in ["sin", "cos", "tan"] {
            let op = MeosOp::new(name, None).unwrap();
            for x in [f64::INFINITY, f64::NEG_INFINITY] {
                assert_eq!(
                    meos.apply(op, x),
                    Err("input is out of range".to_owned()),
                    "{name} {x}"
                );
            }
            assert_eq!(
                meos.apply(op, 0.0),
                Ok(if name == "cos" { 1.0 } else { 0.0 })
            );
        }
    }
}
