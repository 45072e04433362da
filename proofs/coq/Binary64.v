(** Common definitions: binary64 with round-to-nearest-even, as Flocq's
    FLT(-1074, 53) format.  FLT has no largest exponent, so it is binary64
    without overflow: every theorem below applies to a computation whose
    results are all finite, which the code checks (proofs/assumptions.md,
    A0.6: a non-finite value makes the result inconclusive). *)
From Coq Require Import Reals Psatz ZArith.
From Flocq Require Import Core Plus_error Relative.
Open Scope R_scope.

Definition prec64 : Z := 53%Z.
Definition emin64 : Z := (-1074)%Z.

Global Instance prec64_gt_0 : Prec_gt_0 prec64.
Proof. now unfold Prec_gt_0, prec64. Qed.

Notation fexp64 := (FLT_exp emin64 prec64).
(** [F64 x]: x is a (finite) binary64 number, ignoring the upper exponent bound. *)
Notation F64 := (generic_format radix2 fexp64).
(** One binary64 operation in round-to-nearest, ties to even. *)
Notation rnd := (round radix2 fexp64 ZnearestE).

(** unit roundoff u = 2^-53 and smallest subnormal eta = 2^-1074 *)
Definition u : R := bpow radix2 (-53).
Definition eta : R := bpow radix2 (-1074).
(** gamma_n = n u / (1 - n u), as in proofs/README.md *)
Definition gamma (n : nat) : R := INR n * u / (1 - INR n * u).

Lemma bpow_m1 : forall e, bpow radix2 (e - 1) = / 2 * bpow radix2 e.
Proof.
  intros. unfold Z.sub. rewrite bpow_plus, bpow_opp.
  change (bpow radix2 1) with (IZR 2). ring.
Qed.

Lemma u_pos : 0 < u.
Proof. apply bpow_gt_0. Qed.
Lemma eta_pos : 0 < eta.
Proof. apply bpow_gt_0. Qed.
Lemma u_small : u <= /4.
Proof.
  unfold u. replace (/4) with (bpow radix2 (-2)) by (simpl; lra).
  apply bpow_le; lia.
Qed.

(** gamma_n in closed form: n / (2^53 - n). *)
Theorem gamma_closed_form : forall n, (INR n < 2 ^ 53) ->
  gamma n = INR n / (2 ^ 53 - INR n).
Proof.
  intros n Hn. unfold gamma, u.
  assert (H : bpow radix2 (-53) = / 2 ^ 53).
  { rewrite bpow_powerRZ. simpl. f_equal. }
  rewrite H. assert (0 < 2 ^ 53) by (apply pow_lt; lra).
  field; lra.
Qed.

(** Standard model with underflow (A0.3): any real, one rounding. *)
Lemma rnd_model : forall x, exists d e,
  Rabs d <= u /\ Rabs e <= eta / 2 /\ d * e = 0 /\ rnd x = x * (1 + d) + e.
Proof.
  intros x.
  destruct (error_N_FLT radix2 emin64 prec64 (eq_refl _) (fun t => negb (Z.even t)) x)
    as (d & e & Hd & He & Hde & Hr).
  exists d, e. repeat split; auto.
  - replace u with (/ 2 * bpow radix2 (- prec64 + 1)); auto.
    unfold u, prec64. rewrite <- bpow_m1. f_equal.
  - unfold eta. unfold emin64 in He. lra.
Qed.

(** Sums and differences of two binary64 numbers have no absolute error term. *)
Lemma rnd_add_model : forall x y, F64 x -> F64 y ->
  exists d, Rabs d <= u /\ rnd (x + y) = (x + y) * (1 + d).
Proof.
  intros x y Fx Fy.
  destruct (FLT_plus_error_N_ex radix2 emin64 prec64 (fun t => negb (Z.even t)) x y Fx Fy)
    as (d & Hd & Hr).
  exists d; split; auto.
  eapply Rle_trans; [exact Hd|].
  assert (Hu : u_ro radix2 prec64 = u).
  { unfold u_ro, u, prec64. rewrite <- bpow_m1. f_equal. }
  rewrite Hu. pose proof u_pos.
  apply Rmult_le_reg_r with (1 + u); [lra|].
  unfold Rdiv. rewrite Rmult_assoc, Rinv_l by lra. nra.
Qed.

Lemma abs_err_le : forall x, Rabs (rnd x - x) <= u * Rabs x + eta / 2.
Proof.
  intros x. destruct (rnd_model x) as (d & e & Hd & He & _ & Hr).
  rewrite Hr. replace (x * (1 + d) + e - x) with (x * d + e) by ring.
  eapply Rle_trans; [apply Rabs_triang|]. rewrite Rabs_mult.
  pose proof (Rabs_pos x). nra.
Qed.

Lemma F64_rnd : forall x, F64 (rnd x).
Proof. intros; apply generic_format_round; auto with typeclass_instances. Qed.

Lemma rnd_exact : forall x, F64 x -> rnd x = x.
Proof. intros; apply round_generic; auto with typeclass_instances. Qed.

(** [x = N 2^e] with |N| < 2^53 and e >= -1074 is a binary64 number (criterion R). *)
Lemma F64_int_pow2 : forall (N e : Z), (Z.abs N < 2 ^ 53)%Z -> (-1074 <= e)%Z ->
  F64 (IZR N * bpow radix2 e).
Proof.
  intros N e HN He.
  apply generic_format_FLT. exists (Float radix2 N e); [unfold F2R; simpl; ring| |].
  - simpl. exact HN.
  - simpl. unfold emin64. lia.
Qed.

(** Ties-to-even satisfies the symmetry hypothesis of Flocq's Pff results. *)
Lemma choiceE_sym : forall x : Z,
  negb (Z.even x) = negb (negb (Z.even (- (x + 1)))).
Proof.
  intros x. rewrite Z.even_opp, Z.even_add. simpl.
  destruct (Z.even x); reflexivity.
Qed.
